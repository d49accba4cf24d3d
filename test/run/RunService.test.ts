import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { type NodeConnection, NodeRegistry, NodeRegistryLive } from "../../src/run/NodeRegistry.js"
import * as RunEvent from "../../src/run/RunEvent.js"
import { NodeId } from "../../src/run/RunEvent.js"
import { RunService, RunServiceLive } from "../../src/run/RunService.js"
import { NodeUnavailable } from "../../src/run/errors.js"
import type { SubmitRunRequest } from "../../src/run/SubmitRunRequest.js"

const request = (model: string): SubmitRunRequest => ({ model, messages: [], tools: [], sampling: {}, metadata: {} })

const RunPlane = RunServiceLive.pipe(Layer.provideMerge(NodeRegistryLive))

/** A node whose runs follow `script`, recording runs started and stopped early. */
const scriptedNode = (
  id: string,
  models: ReadonlyArray<string>,
  script: Stream.Stream<RunEvent.RunEvent> = Stream.never,
  maxConcurrentRuns = Number.POSITIVE_INFINITY
) => {
  const started: Array<string> = []
  const stopped: Array<string> = []
  const requests: Array<SubmitRunRequest> = []
  const connection: NodeConnection = {
    id: NodeId.make(id),
    models,
    maxConcurrentRuns,
    start: (runId, request) =>
      script.pipe(
        Stream.onStart(Effect.sync(() => requests.push(request))),
        Stream.onStart(Effect.sync(() => started.push(runId))),
        Stream.ensuringWith((exit) => Effect.sync(() => (Exit.isSuccess(exit) ? 0 : stopped.push(runId))))
      )
  }
  return { connection, started, stopped, requests }
}

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

  it.scoped("a run whose consumer leaves is cancelled on its node", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const node = scriptedNode("a", ["m"])
      yield* registry.register(node.connection)
      const handle = yield* runs.submit(request("m"))
      const fiber = yield* Effect.fork(Stream.runDrain(handle.events))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(fiber)
      expect(node.stopped).toEqual([handle.dispatch.runId])
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("node disconnected mid-run: the run fails with NodeDisconnected", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const nodeScope = yield* Scope.make()
      const node = scriptedNode("a", ["m"], Stream.make(RunEvent.delta("x")).pipe(Stream.concat(Stream.never)))
      yield* registry.register(node.connection).pipe(Scope.extend(nodeScope))
      const handle = yield* runs.submit(request("m"))
      const fiber = yield* Effect.fork(Stream.runCollect(handle.events).pipe(Effect.either))
      yield* Effect.yieldNow()
      yield* Scope.close(nodeScope, Exit.void)
      const result = yield* Fiber.join(fiber)
      expect(Either.isLeft(result) && result.left.message).toBe("node disconnected")
      const afterwards = yield* Effect.either(Effect.scoped(runs.submit(request("m"))))
      expect(Either.isLeft(afterwards) && afterwards.left._tag).toBe("NoNodeForModel")
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("events end at the first terminal event; a stream without one is StreamClosed", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const done = RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })
      yield* registry.register(scriptedNode("a", ["ok"], Stream.make(RunEvent.delta("x"), done, RunEvent.delta("late"))).connection)
      yield* registry.register(scriptedNode("b", ["broken"], Stream.make(RunEvent.delta("x"))).connection)
      const ok = yield* Stream.runCollect((yield* runs.submit(request("ok"))).events)
      expect(Chunk.toReadonlyArray(ok).map((e) => e._tag)).toEqual(["Delta", "Complete"])
      const broken = yield* Effect.either(Stream.runCollect((yield* runs.submit(request("broken"))).events))
      expect(Either.isLeft(broken) && broken.left._tag).toBe("StreamClosed")
    }).pipe(Effect.provide(RunPlane))
  )

  it.scoped("a node that refuses before the first event is skipped; its slot is released", () =>
    Effect.gen(function* () {
      const registry = yield* NodeRegistry
      const runs = yield* RunService
      const refusing: NodeConnection = {
        id: NodeId.make("a"),
        models: ["m"],
        maxConcurrentRuns: 1,
        start: () => Stream.fail(new NodeUnavailable({ nodeId: "a", reason: "at capacity" }))
      }
      yield* registry.register(refusing)
      const b = scriptedNode("b", ["m"], Stream.make(RunEvent.delta("x"), RunEvent.cancelled("done")), 5)
      yield* registry.register(b.connection)
      const events = yield* Effect.scoped(runs.submit(request("m")).pipe(Effect.flatMap((h) => Stream.runCollect(h.events))))
      expect(Chunk.toReadonlyArray(events).map((e) => e._tag)).toEqual(["Delta", "Cancelled"])
      expect(b.requests[0]?.metadata).toEqual({ node_attempt: "2", failed_node_id: "a", node_failure: "at capacity" })
      const alone = yield* Effect.either(Effect.scoped(runs.submit(request("m")).pipe(
        Effect.tap(() => registry.nodes.pipe(Effect.map((ns) => ns.find((n) => n.id === "a")?.inFlight))),
        Effect.flatMap((h) => Stream.runCollect(h.events))
      )))
      expect(Either.isRight(alone)).toBe(true)
      const status = yield* registry.nodes
      expect(status.map((s) => s.inFlight)).toEqual([0, 0])
    }).pipe(Effect.provide(RunPlane))
  )
})
