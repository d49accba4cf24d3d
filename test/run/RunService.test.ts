import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { NodeDisconnected, NodeUnavailable } from "../../src/protocol/errors.js"
import { type NodeConnection, NodeRegistry, layer as nodeRegistryLayer } from "../../src/run/NodeRegistry.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"
import { NodeId } from "../../src/protocol/RunEvent.js"
import * as RunServiceM from "../../src/run/RunService.js"
import { RunService } from "../../src/run/RunService.js"
import type { SubmitRunRequest } from "../../src/protocol/SubmitRunRequest.js"
import { scriptedNode } from "../support/ScriptedNode.js"
import { modelOptions } from "../../src/config/EdgeConfig.js"

const request = (model: string): SubmitRunRequest => ({ model, messages: [], tools: [], sampling: {}, metadata: {} })

const RunPlane = RunServiceM.layer({ idleTimeoutMs: 60_000 }).pipe(Layer.provideMerge(nodeRegistryLayer))

const done = RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })

/**
 * A node whose provider waits on a whole answer (`awaitWhole(true)`) for model "m": it answers after `answerAt` ms,
 * or never; at `streamsAt` ms it says it streams after all (`awaitWhole(false)`) and then stays silent.
 */
const wholeNode = (id: string, answerAt: number | undefined, streamsAt?: number) => {
  const stopped: Array<string> = []
  const connection: NodeConnection = {
    id: NodeId.make(id),
    models: [modelOptions("m")],
    maxConcurrentRuns: Number.POSITIVE_INFINITY,
    start: (runId, _request, sink) =>
      Effect.gen(function* () {
        let finished = false
        yield* Effect.addFinalizer(() => Effect.sync(() => (finished ? undefined : stopped.push(runId))))
        sink.awaitWhole?.(true)
        if (streamsAt !== undefined) {
          yield* Effect.forkScoped(Effect.sleep(streamsAt).pipe(Effect.zipRight(Effect.sync(() => sink.awaitWhole?.(false)))))
        }
        if (answerAt === undefined) return
        yield* Effect.forkScoped(Effect.sleep(answerAt).pipe(Effect.zipRight(Effect.sync(() => {
          finished = true
          sink.emit([RunEvent.delta("whole"), done])
          sink.end()
        }))))
      })
  }
  return { connection, stopped }
}

/** Lets the other fibers run until `holds` (a run's scope closing interrupts its producer fiber: a few steps). */
const until = (holds: () => boolean) => Effect.yieldNow().pipe(Effect.repeat({ until: holds, times: 100 }))

describe("RunService", () => {
  it.scoped("no node serves the model: NoNodeForModel", () =>
    Effect.gen(function* () {
      const runs = yield* RunService
      const result = yield* Effect.either(runs.submit(request("ghost")))
      expect(Either.isLeft(result) && result.left._tag).toBe("NoNodeForModel")
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("least-busy dispatch, capacity respected, slots released with the run's scope", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      yield* registry.register(scriptedNode("a", ["m"], Stream.never, 2).connection)
      yield* registry.register(scriptedNode("b", ["m"], Stream.never, 1).connection)
      const scopes = yield* Effect.forEach([1, 2, 3], () => Scope.make())
      const nodes: Array<string> = []
      for (const scope of scopes) nodes.push((yield* runs.submit(request("m")).pipe(Scope.extend(scope))).dispatch.nodeId)
      expect(nodes.sort()).toEqual(["a", "a", "b"])
      const full = yield* Effect.either(Effect.scoped(runs.submit(request("m"))))
      expect(Either.isLeft(full) && full.left._tag).toBe("NodesAtCapacity")
      yield* Scope.close(scopes[0]!, Exit.void)
      const again = yield* Effect.scoped(runs.submit(request("m")))
      expect(again.dispatch.model).toBe("m")
      const status = yield* registry.nodes
      expect(status.reduce((n, s) => n + s.inFlight, 0)).toBe(2)
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("the registry publishes nodes joining and leaving", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const events$ = yield* registry.subscribe
      const seen = yield* Effect.fork(Stream.runCollect(events$.pipe(Stream.take(2))))
      const nodeScope = yield* Scope.make()
      yield* registry.register(scriptedNode("a", ["m"]).connection).pipe(Scope.extend(nodeScope))
      yield* Scope.close(nodeScope, Exit.void)
      const events = Chunk.toReadonlyArray(yield* Fiber.join(seen))
      expect(events.map((e) => e._tag)).toEqual(["NodeJoined", "NodeLeft"])
      expect(yield* registry.nodes).toEqual([])
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("cancel: closing the run's scope stops it on its node and releases its slot", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const node = scriptedNode("a", ["m"], Stream.never, 1)
      yield* registry.register(node.connection)
      const scope = yield* Scope.make()
      const handle = yield* runs.submit(request("m")).pipe(Scope.extend(scope))
      expect(node.started).toEqual([handle.dispatch.runId])
      expect(yield* runs.activeRuns).toBe(1)
      yield* Scope.close(scope, Exit.void)
      expect(node.stopped).toEqual([handle.dispatch.runId])
      expect((yield* registry.nodes)[0]?.inFlight).toBe(0)
      expect(yield* runs.activeRuns).toBe(0)
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("node loss: a node that leaves mid-run fails it with NodeDisconnected, after the events it sent", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const nodeScope = yield* Scope.make()
      const node = scriptedNode("a", ["m"], Stream.make(RunEvent.delta("x")).pipe(Stream.concat(Stream.never)))
      yield* registry.register(node.connection).pipe(Scope.extend(nodeScope))
      const handle = yield* runs.submit(request("m"))
      const first = yield* handle.take
      expect(first).toEqual({ _tag: "Events", events: [RunEvent.delta("x")], done: false })
      yield* Scope.close(nodeScope, Exit.void)
      const result = yield* handle.take
      expect(result._tag === "Failed" && result.error._tag).toBe("NodeDisconnected")
      const afterwards = yield* Effect.either(Effect.scoped(runs.submit(request("m"))))
      expect(Either.isLeft(afterwards) && afterwards.left._tag).toBe("NoNodeForModel")
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("events arrive as they were emitted and end when the producer ends", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      yield* registry.register(scriptedNode("a", ["m"], Stream.make(RunEvent.delta("x"), done)).connection)
      const events = yield* Stream.runCollect((yield* runs.submit(request("m"))).events)
      expect(Chunk.toReadonlyArray(events)).toEqual([RunEvent.delta("x"), done])
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("a node that refuses is skipped; its slot is released; the next node is told why", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const refusing: NodeConnection = {
        id: NodeId.make("a"),
        models: [modelOptions("m")],
        maxConcurrentRuns: 1,
        start: () => Effect.fail(new NodeUnavailable({ nodeId: NodeId.make("a"), reason: "at capacity" }))
      }
      yield* registry.register(refusing)
      const b = scriptedNode("b", ["m"], Stream.make(RunEvent.delta("x"), done), 5)
      yield* registry.register(b.connection)
      const handle = yield* Effect.scoped(
        runs.submit(request("m")).pipe(
          Effect.flatMap((h) => Effect.map(Stream.runCollect(h.events), (events) => ({ h, events })))
        )
      )
      expect(Chunk.toReadonlyArray(handle.events).map((e) => e._tag)).toEqual(["Delta", "Complete"])
      expect(handle.h.dispatch.nodeId).toBe("b")
      expect(b.requests[0]?.metadata).toEqual({ node_attempt: "2", failed_node_id: "a", node_failure: "at capacity" })
      expect((yield* registry.nodes).map((s) => s.inFlight)).toEqual([0, 0])
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("every node refusing fails the submission with NodeUnavailable (nothing ran)", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      yield* registry.register({
        id: NodeId.make("a"),
        models: [modelOptions("m")],
        maxConcurrentRuns: 1,
        start: () => Effect.fail(new NodeUnavailable({ nodeId: NodeId.make("a"), reason: "draining" }))
      })
      const result = yield* Effect.either(Effect.scoped(runs.submit(request("m"))))
      expect(Either.isLeft(result) && result.left._tag).toBe("NodeUnavailable")
      expect((yield* registry.nodes)[0]?.inFlight).toBe(0)
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("idle timeout: 59.9 s without an event keeps the run open, 60 s ends it with RunIdle", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      yield* registry.register(scriptedNode("a", ["m"], Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.never))).connection)
      const handle = yield* runs.submit(request("m"))
      const fiber = yield* Effect.fork(Stream.runCollect(handle.events).pipe(Effect.either))
      yield* TestClock.adjust("59900 millis")
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      yield* TestClock.adjust("100 millis")
      const result = yield* Fiber.join(fiber)
      expect(Either.isLeft(result) && result.left._tag).toBe("RunIdle")
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("idle timeout restarts on every event (it is not a deadline), for each run on its own", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const slow = Stream.fromIterable(["a", "b", "c"]).pipe(
        Stream.tap(() => Effect.sleep("50 seconds")),
        Stream.map(RunEvent.delta),
        Stream.concat(Stream.make(done))
      )
      yield* registry.register(scriptedNode("a", ["slow"], slow).connection)
      yield* registry.register(scriptedNode("b", ["stuck"], Stream.never).connection)
      const slowRun = yield* Effect.fork(Stream.runCollect((yield* runs.submit(request("slow"))).events))
      yield* TestClock.adjust("30 seconds")
      const stuckRun = yield* Effect.fork(Stream.runCollect((yield* runs.submit(request("stuck"))).events).pipe(Effect.either))
      for (let i = 0; i < 3; i++) yield* TestClock.adjust("50 seconds")
      const events = Chunk.toReadonlyArray(yield* Fiber.join(slowRun))
      expect(events.map((e) => (e._tag === "Delta" ? e.text : e._tag))).toEqual(["a", "b", "c", "Complete"])
      const stuck = yield* Fiber.join(stuckRun)
      expect(Either.isLeft(stuck) && stuck.left._tag).toBe("RunIdle")
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("cancelAll: every run at once ends with RunCancelled and is stopped on its node, nobody reading", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const node = scriptedNode("a", ["m"], Stream.make(RunEvent.delta("x")).pipe(Stream.concat(Stream.never)))
      yield* registry.register(node.connection)
      const handles = yield* Effect.forEach(Array.from({ length: 1000 }), () => runs.submit(request("m")))
      yield* runs.cancelAll("edge shutting down")
      expect(node.stopped).toHaveLength(1000)
      expect(yield* runs.activeRuns).toBe(0)
      const last = yield* Effect.either(Stream.runCollect(handles[999]!.events))
      expect(Either.isLeft(last) && last.left).toMatchObject({ _tag: "RunCancelled", message: "edge shutting down" })
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("1000 callers leaving at once: every run is stopped on its node and every slot released", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const node = scriptedNode("a", ["m"], Stream.make(RunEvent.delta("x")).pipe(Stream.concat(Stream.never)))
      yield* registry.register(node.connection)
      const readers = yield* Effect.forEach(Array.from({ length: 1000 }), () =>
        Effect.forkScoped(Effect.scoped(runs.submit(request("m")).pipe(Effect.flatMap((h) => Stream.runDrain(h.events))))))
      yield* Effect.yieldNow()
      expect(node.started).toHaveLength(1000)
      yield* Fiber.interruptAll(readers)
      expect(node.stopped).toHaveLength(1000)
      expect((yield* registry.nodes)[0]?.inFlight).toBe(0)
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("idle timeout ends the run on its node too: upstream stopped and slot released while the caller still holds it", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const node = scriptedNode("a", ["m"], Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.never)))
      yield* registry.register(node.connection)
      const handle = yield* runs.submit(request("m"))
      const reader = yield* Effect.fork(Stream.runCollect(handle.events).pipe(Effect.either))
      yield* TestClock.adjust("59999 millis")
      expect([node.stopped.length, (yield* registry.nodes)[0]?.inFlight]).toEqual([0, 1])
      yield* TestClock.adjust("1 millis")
      const result = yield* Fiber.join(reader)
      expect(Either.isLeft(result) && result.left._tag).toBe("RunIdle")
      yield* until(() => node.stopped.length > 0)
      expect([node.stopped.length, (yield* registry.nodes)[0]?.inFlight, yield* runs.activeRuns]).toEqual([1, 0, 0])
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("whole answer: a producer waiting on one is not cut at idleTimeoutMs; its answer at 5 min completes the run", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const node = wholeNode("a", 300_000)
      yield* registry.register(node.connection)
      const handle = yield* runs.submit(request("m"))
      const reader = yield* Effect.fork(Stream.runCollect(handle.events).pipe(Effect.either))
      yield* TestClock.adjust("61 seconds")
      expect(Option.isNone(yield* Fiber.poll(reader))).toBe(true)
      yield* TestClock.adjust("239 seconds")
      const result = yield* Fiber.join(reader)
      expect(Either.isRight(result) && Chunk.toReadonlyArray(result.right).map((e) => e._tag)).toEqual(["Delta", "Complete"])
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("whole answer: runs.wholeAnswerTimeoutMs bounds the wait (RunIdle), and the run is stopped on its node", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const node = wholeNode("a", undefined)
      yield* registry.register(node.connection)
      const handle = yield* runs.submit(request("m"))
      const reader = yield* Effect.fork(Stream.runCollect(handle.events).pipe(Effect.either))
      // The default bound is 600 s; the watchdog wakes at least every idleTimeoutMs meanwhile.
      for (let i = 0; i < 9; i++) yield* TestClock.adjust("60 seconds")
      yield* TestClock.adjust("59999 millis")
      expect([Option.isNone(yield* Fiber.poll(reader)), node.stopped.length]).toEqual([true, 0])
      yield* TestClock.adjust("1 millis")
      const result = yield* Fiber.join(reader)
      expect(Either.isLeft(result) && result.left).toMatchObject({ _tag: "RunIdle", idleMs: 600_000 })
      yield* until(() => node.stopped.length > 0)
      expect([node.stopped.length, yield* runs.activeRuns]).toEqual([1, 0])
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("whole answer: once the producer streams after all (awaitWhole(false)), the idle bound applies from there", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const node = wholeNode("a", undefined, 120_000)
      yield* registry.register(node.connection)
      const handle = yield* runs.submit(request("m"))
      const reader = yield* Effect.fork(Stream.runCollect(handle.events).pipe(Effect.either))
      yield* TestClock.adjust("120 seconds")
      yield* TestClock.adjust("59999 millis")
      expect(Option.isNone(yield* Fiber.poll(reader))).toBe(true)
      yield* TestClock.adjust("1 millis")
      const result = yield* Fiber.join(reader)
      expect(Either.isLeft(result) && result.left).toMatchObject({ _tag: "RunIdle", idleMs: 60_000 })
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("write stall: a reader that stops taking a fast run's events ends it after idleTimeoutMs without progress", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      // Far more than the channel holds: the producer is paused once the reader stops reading.
      const fast = Stream.range(1, 5000).pipe(Stream.map((i) => RunEvent.delta(String(i))), Stream.rechunk(100))
      const node = scriptedNode("a", ["m"], fast.pipe(Stream.concat(Stream.make(done))))
      yield* registry.register(node.connection)
      const handle = yield* runs.submit(request("m"))
      let terminated: string | undefined
      handle.onTerminated((e) => (terminated = e._tag))
      yield* until(handle.accepted)
      // The reader reads twice, 40 s apart (progress), then never again: nothing more moves.
      expect(handle.read()?._tag).toBe("Events")
      yield* TestClock.adjust("40 seconds")
      expect(handle.read()?._tag).toBe("Events")
      yield* TestClock.adjust("59999 millis")
      expect([terminated, node.stopped.length]).toEqual([undefined, 0])
      yield* TestClock.adjust("1 millis")
      yield* until(() => node.stopped.length > 0)
      expect([terminated, node.stopped.length, (yield* registry.nodes)[0]?.inFlight]).toEqual(["WriteStalled", 1, 0])
      // A reader that comes back finds what was there, then the error.
      let last = handle.read()
      while (last?._tag === "Events" && !last.done) last = handle.read()
      expect(last).toMatchObject({ _tag: "Failed", error: { _tag: "WriteStalled" } })
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("a slow reader is not a stalled one: each read is progress", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const fast = Stream.range(1, 3000).pipe(Stream.map((i) => RunEvent.delta(String(i))), Stream.rechunk(100))
      yield* registry.register(scriptedNode("a", ["m"], fast.pipe(Stream.concat(Stream.make(done)))).connection)
      const handle = yield* runs.submit(request("m"))
      yield* until(handle.accepted)
      const tags: Array<string> = []
      for (let i = 0; i < 20; i++) {
        const read = handle.read()
        if (read?._tag === "Failed") tags.push(read.error._tag)
        if (read?._tag === "Events" && read.done) tags.push("done")
        if (tags.length > 0) break
        yield* TestClock.adjust("50 seconds")
      }
      expect(tags).toEqual(["done"])
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("node loss ends the run on its node as well (one way to end a run early)", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const node = scriptedNode("a", ["m"], Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.never)))
      const nodeScope = yield* Scope.make()
      yield* registry.register(node.connection).pipe(Scope.extend(nodeScope))
      const handle = yield* runs.submit(request("m"))
      yield* until(handle.accepted)
      yield* Scope.close(nodeScope, Exit.void)
      yield* until(() => node.stopped.length > 0)
      expect([node.stopped.length, yield* runs.activeRuns]).toEqual([1, 0])
      const result = yield* Effect.either(Stream.runCollect(handle.events))
      expect(Either.isLeft(result) && result.left._tag).toBe("NodeDisconnected")
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("a transport's fail ends the run the same way (a lost subscription)", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      let sinkOf: ((error: NodeDisconnected) => void) | undefined
      const stopped: Array<string> = []
      yield* registry.register({
        id: NodeId.make("a"),
        models: [modelOptions("m")],
        maxConcurrentRuns: 1,
        start: (runId, _request, sink) =>
          Effect.sync(() => {
            sinkOf = sink.fail
          }).pipe(Effect.zipRight(Effect.addFinalizer(() => Effect.sync(() => stopped.push(runId)))))
      })
      const handle = yield* runs.submit(request("m"))
      sinkOf?.(new NodeDisconnected({ nodeId: NodeId.make("a") }))
      yield* Effect.yieldNow()
      expect([stopped.length, (yield* registry.nodes)[0]?.inFlight]).toEqual([1, 0])
      expect(handle.read()).toMatchObject({ _tag: "Failed", error: { _tag: "NodeDisconnected" } })
    }).pipe(Effect.provide(RunPlane))
  )
})
