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
import OpenAI from "openai"
import { EchoProvider, LocalNode, RunErrors, RunEvent, RunService } from "../../src/index.js"
import {
  layerEchoModel,
  ErrorResponse,
  RecordingSink,
  runRequest,
  ScriptedProvider,
  ScriptedRunService,
  Step,
  TestEdge,
  TestServer
} from "../../src/testing.js"

const texts = (events: Iterable<RunEvent.RunEvent>) => Array.from(events, (e) => (e._tag === "Delta" ? e.text : e._tag))

describe("iop-edge/testing: the TestClock recipe", () => {
  // Exactly as the module doc of src/testing.ts shows it.
  it.scoped("a silent run times out after 60 s", () =>
    Effect.gen(function* () {
      const scripted = yield* ScriptedProvider
      const runs = yield* RunService.RunService
      const handle = yield* runs.submit(runRequest("mine"))
      const outcome = yield* Effect.fork(Effect.flip(Stream.runDrain(handle.events)))
      yield* scripted.nextRun // started, and never driven: silent
      yield* TestClock.adjust("59 seconds")
      expect(Option.isNone(yield* Fiber.poll(outcome))).toBe(true)
      yield* TestClock.adjust("1 second")
      expect((yield* Fiber.join(outcome))._tag).toBe("RunIdle")
    }).pipe(Effect.provide(TestEdge.layer({ nodes: ScriptedProvider.layer("mine") })))
  )

  it.scoped("the idle limit is the config's; the timeout reaches the provider as a cancellation", () =>
    Effect.gen(function* () {
      const scripted = yield* ScriptedProvider
      const runs = yield* RunService.RunService
      const handle = yield* Effect.scoped(Effect.gen(function* () {
        const handle = yield* runs.submit(runRequest("mine"))
        const run = yield* scripted.nextRun
        yield* run.text("a")
        const outcome = yield* Effect.fork(Effect.either(Stream.runCollect(handle.events)))
        yield* TestClock.adjust("4999 millis")
        expect(yield* run.state).toBe("running")
        yield* TestClock.adjust("1 milli")
        const result = yield* Fiber.join(outcome)
        expect(result._tag === "Left" && result.left).toBeInstanceOf(RunErrors.RunIdle)
        return run
      }))
      yield* handle.cancelled
      expect(yield* handle.isOpen).toBe(false)
    }).pipe(Effect.provide(TestEdge.layer({ config: { runs: { idleTimeoutMs: 5_000 } }, nodes: ScriptedProvider.layer("mine") })))
  )
})

describe("ScriptedProvider", () => {
  it.scoped("the test drives a run: its request, deltas, completion with usage", () =>
    Effect.gen(function* () {
      const scripted = yield* ScriptedProvider
      const runs = yield* RunService.RunService
      const handle = yield* runs.submit(runRequest("mine", "hello"))
      const run = yield* scripted.nextRun
      expect(run.request.messages).toEqual([{ role: "user", content: "hello" }])
      yield* run.text("Hel")
      yield* run.emit(RunEvent.delta("lo"), RunEvent.reasoningDelta("hm"))
      yield* run.complete({ inputTokens: 1, outputTokens: 2 })
      yield* run.text("after the end: dropped")
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(handle.events))
      expect(texts(events)).toEqual(["Hel", "lo", "ReasoningDelta", "Complete"])
      expect(events.at(-1)).toMatchObject({ finishReason: "stop", usage: { inputTokens: 1, outputTokens: 2 } })
      expect(yield* run.state).toBe("ended")
      expect(yield* scripted.runs).toEqual([run])
    }).pipe(Effect.provide(TestEdge.layer({ nodes: ScriptedProvider.layer("mine") })))
  )

  it.scoped("cancellation: the caller leaving closes the run's scope, and `cancelled` says it reached the provider", () =>
    Effect.gen(function* () {
      const scripted = yield* ScriptedProvider
      const runs = yield* RunService.RunService
      const caller = yield* Scope.make()
      const handle = yield* runs.submit(runRequest("mine")).pipe(Scope.extend(caller))
      const run = yield* scripted.nextRun
      yield* run.text("a")
      expect(yield* handle.take).toMatchObject({ _tag: "Events", events: [RunEvent.delta("a")] })
      expect(yield* run.isOpen).toBe(true)
      yield* Scope.close(caller, Exit.void)
      yield* run.cancelled
      expect(yield* run.state).toBe("cancelled")
      expect(yield* run.isOpen).toBe(false)
      expect(yield* runs.activeRuns).toBe(0)
    }).pipe(Effect.provide(TestEdge.layer({ nodes: ScriptedProvider.layer("mine") })))
  )

  it.scoped("a failure, and a run that ends without a terminal event", () =>
    Effect.gen(function* () {
      const scripted = yield* ScriptedProvider
      const runs = yield* RunService.RunService
      const failed = yield* runs.submit(runRequest("mine"))
      yield* (yield* scripted.nextRun).fail("upstream exploded")
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(failed.events))).toEqual([RunEvent.failed("upstream exploded")])
      const broken = yield* runs.submit(runRequest("mine"))
      const run = yield* scripted.nextRun
      yield* run.text("half")
      yield* run.end
      // The run's channel is the one terminator: the events, then `StreamClosed` (`run stream closed`).
      const read = Chunk.toReadonlyArray(yield* Stream.runCollect(Stream.either(broken.events)))
      expect(texts(read.flatMap((r) => (Either.isRight(r) ? [r.right] : [])))).toEqual(["half"])
      expect(read.flatMap((r) => (Either.isLeft(r) ? [r.left._tag] : []))).toEqual(["StreamClosed"])
      expect(yield* run.state).toBe("ended")
    }).pipe(Effect.provide(TestEdge.layer({ nodes: ScriptedProvider.layer("mine") })))
  )

  it.scoped("a script: batches, sleeps by the TestClock, ends at its terminal event", () =>
    Effect.gen(function* () {
      const runs = yield* RunService.RunService
      const handle = yield* runs.submit(runRequest("mine"))
      expect(yield* handle.take).toEqual({ _tag: "Events", events: [RunEvent.delta("a"), RunEvent.delta("b")], done: false })
      const events = yield* Effect.fork(Stream.runCollect(handle.events))
      yield* TestClock.adjust("1999 millis")
      expect(Option.isNone(yield* Fiber.poll(events))).toBe(true)
      yield* TestClock.adjust("1 milli")
      expect(texts(Chunk.toReadonlyArray(yield* Fiber.join(events)))).toEqual(["c", "Complete"])
    }).pipe(
      Effect.provide(TestEdge.layer({
        nodes: ScriptedProvider.layer("mine", {
          script: [Step.text("a"), Step.text("b"), Step.sleep("2 seconds"), Step.text("c"), Step.complete(), Step.text("never")]
        })
      }))
    )
  )

  it.scoped("a stalled script is silent until the idle timeout; `make` + LocalNode.layerModel serve several scripted models", () =>
    Effect.gen(function* () {
      const stalled = yield* ScriptedProvider.script([Step.text("thinking"), Step.stall])
      const driven = yield* ScriptedProvider.make
      yield* Effect.gen(function* () {
        const runs = yield* RunService.RunService
        const slow = yield* Effect.fork(
          Effect.scoped(Effect.flatMap(runs.submit(runRequest("stalled")), (h) => Effect.flip(Stream.runDrain(h.events))))
        )
        const thinking = yield* stalled.nextRun
        const fast = yield* runs.submit(runRequest("driven"))
        yield* (yield* driven.nextRun).complete()
        expect(texts(Chunk.toReadonlyArray(yield* Stream.runCollect(fast.events)))).toEqual(["Complete"])
        yield* TestClock.adjust("60 seconds")
        expect((yield* Fiber.join(slow))._tag).toBe("RunIdle")
        // The reader's scope closed with its outcome: the stalled run was cancelled on its provider.
        yield* thinking.cancelled
      }).pipe(
        Effect.provide(TestEdge.layer({
          nodes: Layer.mergeAll(LocalNode.layerModel("stalled", stalled.provider), LocalNode.layerModel("driven", driven.provider))
        }))
      )
    })
  )
})

describe("layerEchoModel", () => {
  it.scoped("echoes at once: no token delay, so no clock to move", () =>
    Effect.gen(function* () {
      const runs = yield* RunService.RunService
      const handle = yield* runs.submit(runRequest("echo", "one two"))
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(handle.events))
      expect(texts(events)).toEqual(["one", " two", "Complete"])
      expect(events.at(-1)).toMatchObject({ usage: { inputTokens: 2, outputTokens: 2 } })
    }).pipe(Effect.provide(TestEdge.layer({ nodes: layerEchoModel() })))
  )
})

describe("ScriptedRunService and RecordingSink", () => {
  it.scoped("ScriptedRunService: each submission plays its script, refusals fail it, cancellation is recorded", () => {
    const scripted = ScriptedRunService.make([
      ScriptedRunService.events(RunEvent.delta("a"), Step.complete()),
      ScriptedRunService.refuse(new RunErrors.NoNodeForModel({ model: "m" })),
      ScriptedRunService.eventStream(Stream.concat(Stream.make(RunEvent.delta("b")), Stream.never))
    ])
    return Effect.gen(function* () {
      const runs = yield* RunService.RunService
      const first = yield* Effect.scoped(Effect.flatMap(runs.submit(runRequest("m")), (h) => Stream.runCollect(h.events)))
      expect(texts(Chunk.toReadonlyArray(first))).toEqual(["a", "Complete"])
      expect((yield* Effect.flip(runs.submit(runRequest("m"))))._tag).toBe("NoNodeForModel")
      const third = yield* Effect.scoped(Effect.flatMap(runs.submit(runRequest("m")), (h) => h.take))
      expect(third).toMatchObject({ _tag: "Events", events: [RunEvent.delta("b")] })
      expect(scripted.submitted).toHaveLength(3)
      expect(scripted.released).toEqual(["run_scripted1", "run_scripted3"])
      expect(scripted.cancelled).toEqual(["run_scripted3"])
    }).pipe(Effect.provide(scripted.layer))
  })

  it.scoped("RecordingSink: a provider tested on its own", () =>
    Effect.gen(function* () {
      const rec = yield* RecordingSink.make
      yield* EchoProvider.make({ tokenDelayMs: 0 }).start(runRequest("echo", "hi there"), rec.sink)
      expect(yield* rec.ended).toBeUndefined()
      expect(texts(yield* rec.events)).toEqual(["hi", " the", "re", "Complete"])
    })
  )
})

describe("TestServer", () => {
  const layer = TestServer.layer({ nodes: Layer.merge(layerEchoModel(), ScriptedProvider.layer("mine")) })

  it.scopedLive("the openai SDK against its url: streamed and not", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const openai = new OpenAI({ baseURL: server.baseURL, apiKey: "test", maxRetries: 0 })
      const completion = yield* Effect.promise(() =>
        openai.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "hello world" }] })
      )
      expect(completion.choices[0]?.message.content).toBe("hello world")
      const parts = yield* Effect.promise(async () => {
        const stream = await openai.chat.completions.create({
          model: "echo",
          stream: true,
          messages: [{ role: "user", content: "hello world" }]
        })
        const out: Array<string> = []
        for await (const chunk of stream) out.push(chunk.choices[0]?.delta.content ?? "")
        return out.join("")
      })
      expect(parts).toBe("hello world")
      const models = yield* Effect.promise(() => openai.models.list())
      expect(models.data.map((m) => m.id).sort()).toEqual(["echo", "mine"])
    }).pipe(Effect.provide(layer))
  )

  it.scopedLive("chat / chatStream against a scripted model; an unknown model is an ErrorResponse", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const scripted = yield* ScriptedProvider
      const answer = yield* Effect.fork(server.chat({ model: "mine", messages: [{ role: "user", content: "hi" }] }))
      const run = yield* scripted.nextRun
      yield* run.text("scripted")
      yield* run.complete({ inputTokens: 1, outputTokens: 1 })
      expect(yield* Fiber.join(answer)).toMatchObject({ choices: [{ message: { content: "scripted" } }], usage: { total_tokens: 2 } })

      const streamed = yield* Effect.fork(Stream.runCollect(server.chatStream({ model: "mine", messages: [{ role: "user", content: "hi" }] })))
      const second = yield* scripted.nextRun
      yield* second.text("a")
      yield* second.fail("upstream exploded")
      const events = Chunk.toReadonlyArray(yield* Fiber.join(streamed))
      expect(events.at(-1)).toEqual({ data: "[DONE]" })
      expect(events.at(-2)?.data).toContain("upstream exploded")

      const missing = yield* Effect.flip(server.chat({ model: "nope", messages: [{ role: "user", content: "hi" }] }))
      expect(missing).toBeInstanceOf(ErrorResponse)
      expect(missing).toMatchObject({ status: 404, body: { error: { code: "model_not_found" } } })
    }).pipe(Effect.provide(layer))
  )

  it.scopedLive("a client that stops reading mid-stream: the edge cancels the run on its provider", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const scripted = yield* ScriptedProvider
      const reader = yield* Effect.fork(
        Stream.runCollect(Stream.take(server.chatStream({ model: "mine", messages: [{ role: "user", content: "hi" }] }), 2))
      )
      const run = yield* scripted.nextRun
      yield* run.text("a")
      yield* Fiber.join(reader)
      yield* run.cancelled
      expect(yield* run.state).toBe("cancelled")
    }).pipe(Effect.provide(layer))
  )

  it.scoped("over HTTP on the TestClock: a silent streamed run ends with `run timed out`", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const scripted = yield* ScriptedProvider
      const streamed = yield* Effect.fork(Stream.runCollect(server.chatStream({ model: "mine", messages: [{ role: "user", content: "hi" }] })))
      const run = yield* scripted.nextRun
      yield* run.text("a")
      yield* TestClock.adjust("60 seconds")
      const events = Chunk.toReadonlyArray(yield* Fiber.join(streamed))
      expect(events.at(-2)?.data).toContain("run timed out")
      yield* run.cancelled
    }).pipe(Effect.provide(layer))
  )

  it.scoped("a test that ends with a stream still open tears the server down at once (no drain on the TestClock)", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const scripted = yield* ScriptedProvider
      // A daemon: the client is still reading when the test's scope closes; the server closes its connection.
      yield* Effect.forkDaemon(Stream.runDrain(server.chatStream({ model: "mine", messages: [{ role: "user", content: "hi" }] })))
      yield* (yield* scripted.nextRun).text("a")
    }).pipe(Effect.provide(layer))
  )
})
