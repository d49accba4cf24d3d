import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { modelOptions } from "../../src/config/EdgeConfig.js"
import type { RunError } from "../../src/protocol/errors.js"
import type { ModelOptions } from "../../src/protocol/ModelOptions.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"
import { NodeId } from "../../src/protocol/RunEvent.js"
import type { RunSink } from "../../src/protocol/RunSink.js"
import type { SubmitRunRequest } from "../../src/protocol/SubmitRunRequest.js"
import { layer as nodeRegistryLayer, NodeRegistry } from "../../src/run/NodeRegistry.js"
import * as RunServiceM from "../../src/run/RunService.js"
import { RunService } from "../../src/run/RunService.js"

/*
 * The run bounds beside the idle one, on the TestClock: `runs.firstTokenTimeoutMs` (no first content, reasoning or
 * tool-call output) and `runs.maxRunMs` (the whole run), the edge's and a model's own, enforced by the run plane's
 * one watchdog.
 */

const request = (model: string, wholeAnswer = false): SubmitRunRequest => ({
  model,
  messages: [],
  tools: [],
  sampling: {},
  metadata: {},
  ...(wholeAnswer ? { wholeAnswer } : {})
})

const done = RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })

/** A node whose runs the test drives through their sinks (in start order); records the runs stopped before their end. */
const drivenNode = (models: ReadonlyArray<ModelOptions>) => {
  const sinks: Array<RunSink> = []
  const stopped: Array<string> = []
  return {
    sinks,
    stopped,
    connection: {
      id: NodeId.make("a"),
      models,
      maxConcurrentRuns: Number.POSITIVE_INFINITY,
      start: (runId: RunEvent.RunId, _request: SubmitRunRequest, sink: RunSink) =>
        Effect.gen(function* () {
          let finished = false
          sinks.push({ ...sink, end: () => ((finished = true), sink.end()) })
          yield* Effect.addFinalizer(() => Effect.sync(() => (finished ? undefined : stopped.push(runId))))
        })
    }
  }
}

const plane = (options: Partial<RunServiceM.RunServiceOptions>) =>
  RunServiceM.layer({ idleTimeoutMs: 60_000, ...options }).pipe(Layer.provideMerge(nodeRegistryLayer))

/** Serves `models` on a driven node, submits one run of `model` and reads it to its end in a fiber. */
const started = (models: ReadonlyArray<ModelOptions>, model: string, wholeAnswer = false) =>
  Effect.gen(function* () {
    const node = drivenNode(models)
    yield* (yield* NodeRegistry).register(node.connection)
    const handle = yield* (yield* RunService).submit(request(model, wholeAnswer))
    const reader = yield* Effect.fork(Stream.runCollect(handle.events).pipe(Effect.either))
    yield* Effect.yieldNow()
    return { node, reader, sink: node.sinks[0]! }
  })

const open = (reader: Fiber.Fiber<unknown>) => Effect.map(Fiber.poll(reader), Option.isNone)

/** How the reader ended, now (never waiting: a run still open is "open"). */
const failure = <A>(reader: Fiber.Fiber<Either.Either<A, RunError>>) =>
  Effect.yieldNow().pipe(
    Effect.zipRight(Fiber.poll(reader)),
    Effect.map(Option.match({
      onNone: () => "open" as const,
      onSome: (exit) => (exit._tag === "Success" && Either.isLeft(exit.value) ? exit.value.left : exit)
    }))
  )

/** Lets the other fibers run until `holds` (a run's scope closing interrupts its producer: a few steps). */
const until = (holds: () => boolean) => Effect.yieldNow().pipe(Effect.repeat({ until: holds, times: 100 }))

describe("runs.firstTokenTimeoutMs", () => {
  it.scoped("an accepted run with no output: open at 9.999 s, ended at 10 s (RunDeadline first_token), upstream stopped", () =>
    Effect.gen(function* () {
      const { node, reader, sink } = yield* started([modelOptions("m")], "m")
      // The upstream's 200 (and a role-only chunk, which maps to no event) is not a first token.
      sink.accept()
      sink.emit([])
      yield* TestClock.adjust("9999 millis")
      expect([yield* open(reader), node.stopped.length]).toEqual([true, 0])
      yield* TestClock.adjust("1 millis")
      expect(yield* failure(reader)).toMatchObject({ _tag: "RunDeadline", bound: "first_token", ms: 10_000 })
      yield* until(() => node.stopped.length > 0)
      expect(node.stopped).toHaveLength(1)
    }).pipe(Effect.provide(plane({ firstTokenTimeoutMs: 10_000 })))
  )

  it.scoped("a first content, reasoning or tool-call output before the bound lifts it; the idle bound goes on", () =>
    Effect.gen(function* () {
      for (const first of ["content", "reasoning", "tool call"] as const) {
        const { reader, sink } = yield* started([modelOptions("m")], "m")
        yield* TestClock.adjust("9 seconds")
        if (first === "content") sink.emit([RunEvent.delta("a")])
        else if (first === "reasoning") sink.emit([RunEvent.reasoningDelta("hm")])
        else sink.progress?.()
        // Past the first-token bound: still open; the idle bound ends it 60 s after that output.
        yield* TestClock.adjust("59999 millis")
        expect(yield* open(reader)).toBe(true)
        yield* TestClock.adjust("1 millis")
        expect(yield* failure(reader)).toMatchObject({ _tag: "RunIdle", idleMs: 60_000 })
      }
    }).pipe(Effect.provide(plane({ firstTokenTimeoutMs: 10_000 })))
  )

  it.scoped("a request for a whole answer is not bound by it (no token can be seen before the end)", () =>
    Effect.gen(function* () {
      const { reader, sink } = yield* started([modelOptions("m")], "m", true)
      sink.awaitWhole?.(true)
      yield* TestClock.adjust("30 seconds")
      expect(yield* open(reader)).toBe(true)
      sink.emit([RunEvent.delta("whole"), done])
      sink.end()
      expect(Either.isRight(yield* Fiber.join(reader))).toBe(true)
    }).pipe(Effect.provide(plane({ firstTokenTimeoutMs: 10_000 })))
  )

  it.scoped("shorter than the idle bound, for a run started while the watchdog sleeps: it ends at its own bound, not later", () =>
    Effect.gen(function* () {
      // A first run puts the watchdog to sleep for the idle bound (60 s); the second is due 5 s after its start.
      const models = [modelOptions({ id: "long", runs: { firstTokenTimeoutMs: null } }), modelOptions({ id: "short", runs: { firstTokenTimeoutMs: 5_000 } })]
      const first = yield* started(models, "long")
      yield* TestClock.adjust("10 seconds")
      const handle = yield* (yield* RunService).submit(request("short"))
      const second = yield* Effect.fork(Stream.runCollect(handle.events).pipe(Effect.either))
      yield* TestClock.adjust("4999 millis")
      expect(yield* open(second)).toBe(true)
      yield* TestClock.adjust("1 millis")
      expect(yield* failure(second)).toMatchObject({ _tag: "RunDeadline", bound: "first_token", ms: 5_000 })
      expect(yield* open(first.reader)).toBe(true)
    }).pipe(Effect.provide(plane({ firstTokenTimeoutMs: 30_000 })))
  )
})

describe("runs.maxRunMs", () => {
  it.scoped("a run producing a token every second is not cut by the first-token bound, but is at maxRunMs", () =>
    Effect.gen(function* () {
      const { node, reader, sink } = yield* started([modelOptions("m")], "m")
      for (let i = 0; i < 29; i++) {
        yield* TestClock.adjust("1 second")
        sink.emit([RunEvent.delta(String(i))])
      }
      yield* TestClock.adjust("999 millis")
      expect(yield* open(reader)).toBe(true)
      yield* TestClock.adjust("1 millis")
      expect(yield* failure(reader)).toMatchObject({ _tag: "RunDeadline", bound: "max_run", ms: 30_000 })
      yield* until(() => node.stopped.length > 0)
      expect(node.stopped).toHaveLength(1)
    }).pipe(Effect.provide(plane({ firstTokenTimeoutMs: 2_000, maxRunMs: 30_000 })))
  )

  it.scoped("a whole answer is bound by it too; a run that ended before it is not touched", () =>
    Effect.gen(function* () {
      const whole = yield* started([modelOptions("m")], "m", true)
      whole.sink.awaitWhole?.(true)
      const quick = yield* (yield* RunService).submit(request("m"))
      const quickSink = whole.node.sinks[1]!
      quickSink.emit([RunEvent.delta("a"), done])
      quickSink.end()
      yield* TestClock.adjust("30 seconds")
      expect(yield* failure(whole.reader)).toMatchObject({ _tag: "RunDeadline", bound: "max_run", ms: 30_000 })
      const events = yield* Stream.runCollect(quick.events)
      expect(Array.from(events, (e) => e._tag)).toEqual(["Delta", "Complete"])
    }).pipe(Effect.provide(plane({ maxRunMs: 30_000 })))
  )
})

describe("a model's own bounds (announced by its node)", () => {
  it.scoped("replace the edge's: a number is the model's bound, null is none, absent is the edge's", () =>
    Effect.gen(function* () {
      const models = [
        modelOptions("edge"),
        modelOptions({ id: "own", runs: { firstTokenTimeoutMs: 3_000, maxRunMs: 120_000 } }),
        modelOptions({ id: "none", runs: { firstTokenTimeoutMs: null, maxRunMs: null } })
      ]
      const node = drivenNode(models)
      yield* (yield* NodeRegistry).register(node.connection)
      const runs = yield* RunService
      const readers = yield* Effect.forEach(["edge", "own", "none"], (model) =>
        runs.submit(request(model)).pipe(
          Effect.flatMap((h) => Effect.fork(Stream.runCollect(h.events).pipe(Effect.either)))
        ))
      const [edge, own, none] = readers
      yield* TestClock.adjust("3 seconds")
      expect(yield* failure(own!)).toMatchObject({ _tag: "RunDeadline", bound: "first_token", ms: 3_000 })
      expect([yield* open(edge!), yield* open(none!)]).toEqual([true, true])
      yield* TestClock.adjust("7 seconds")
      expect(yield* failure(edge!)).toMatchObject({ _tag: "RunDeadline", bound: "first_token", ms: 10_000 })
      // No first-token bound, no run bound: only the idle one (60 s) ends it.
      yield* TestClock.adjust("49999 millis")
      expect(yield* open(none!)).toBe(true)
      yield* TestClock.adjust("1 millis")
      expect(yield* failure(none!)).toMatchObject({ _tag: "RunIdle" })
    }).pipe(Effect.provide(plane({ firstTokenTimeoutMs: 10_000, maxRunMs: 20_000 })))
  )
})

describe("the idle bound, beside them", () => {
  it.scoped("still ends a run that went silent after its first token, before maxRunMs", () =>
    Effect.gen(function* () {
      const { reader, sink } = yield* started([modelOptions("m")], "m")
      sink.emit([RunEvent.delta("a")])
      yield* TestClock.adjust("59999 millis")
      expect(yield* open(reader)).toBe(true)
      yield* TestClock.adjust("1 millis")
      expect(yield* failure(reader)).toMatchObject({ _tag: "RunIdle", idleMs: 60_000 })
    }).pipe(Effect.provide(plane({ firstTokenTimeoutMs: 10_000, maxRunMs: 600_000 })))
  )
})
