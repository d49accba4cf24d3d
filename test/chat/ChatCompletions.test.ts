import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { ChatCompletions, ChatCompletionsLive } from "../../src/chat/ChatCompletions.js"
import type { StreamItem } from "../../src/chat/chunks.js"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { decodeBody, toChatRequest } from "../../src/http/toChatRequest.js"
import { Metrics, MetricsTest } from "../../src/observability/Metrics.js"
import { NodeDisconnected, NodeUnavailable, NoNodeForModel, StreamClosed } from "../../src/run/errors.js"
import * as RunEvent from "../../src/run/RunEvent.js"
import { eventStream, events, refuse, type Script, scriptedRuns } from "../support/ScriptedRunService.js"

const config = Either.getOrThrow(
  decodeConfigJson("test", {
    models: [
      { id: "echo", provider: { type: "echo" } },
      { id: "strict", provider: { type: "echo" }, output: { strict: true } },
      { id: "buffered", provider: { type: "echo" }, output: { strict: true, streamBuffer: true } }
    ]
  })
)

const weather = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
  }
}

const request = (body: Record<string, unknown>) =>
  Effect.gen(function* () {
    const wire = yield* decodeBody(JSON.stringify({ messages: [{ role: "user", content: "hi" }], ...body }))
    return yield* toChatRequest(config, wire)
  }).pipe(Effect.orDie)

const setup = (scripts: ReadonlyArray<Script>) => {
  const runs = scriptedRuns(scripts)
  const layer = ChatCompletionsLive.pipe(
    Layer.provide(Layer.mergeAll(runs.layer, MetricsTest, EdgeConfig.layer(config)))
  )
  return { runs, layer }
}

const collect = (items: Stream.Stream<StreamItem>) => Stream.runCollect(items).pipe(Effect.map(Chunk.toReadonlyArray))

const chunkDeltas = (items: ReadonlyArray<StreamItem>) =>
  items.flatMap((i) => {
    if (i._tag !== "Chunk") return []
    const c = i.chunk as { choices: Array<{ delta: Record<string, unknown>; finish_reason: string | null }> }
    return c.choices.map((ch): Record<string, unknown> => ({ ...ch.delta, finish_reason: ch.finish_reason }))
  })

const call = (args: string) => RunEvent.complete({
  finishReason: "tool_calls",
  toolCalls: [{ id: "call_1", name: "get_weather", arguments: args }],
  metadata: {}
})

describe("ChatCompletions", () => {
  it.scoped("idle timeout: 59.9 s without an event keeps the stream open, 60 s ends it with `run timed out` and cancels the run", () => {
    const { runs, layer } = setup([eventStream(Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.never)))])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const items = yield* chat.stream(yield* request({ model: "echo", stream: true }))
      const fiber = yield* Effect.fork(collect(items))
      yield* TestClock.adjust("59900 millis")
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      yield* TestClock.adjust("100 millis")
      const out = yield* Fiber.join(fiber)
      expect(out[out.length - 1]).toMatchObject({ _tag: "Error", error: { _tag: "RunTimedOut" } })
      expect(out.filter((i) => i._tag === "Error")).toHaveLength(1)
      expect(runs.cancelled).toEqual(["run_scripted1"])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("idle timeout restarts on every event (it is not a deadline)", () => {
    const slow = Stream.fromIterable(["a", "b", "c"]).pipe(
      Stream.tap(() => Effect.sleep("50 seconds")),
      Stream.map(RunEvent.delta),
      Stream.concat(Stream.make(RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })))
    )
    const { layer } = setup([eventStream(slow)])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const items = yield* chat.stream(yield* request({ model: "echo", stream: true }))
      const fiber = yield* Effect.fork(collect(items))
      for (let i = 0; i < 3; i++) yield* TestClock.adjust("50 seconds")
      const out = yield* Fiber.join(fiber)
      expect(chunkDeltas(out).map((d) => d["content"] ?? d.finish_reason)).toEqual([
        "",
        "a",
        "b",
        "c",
        "stop"
      ])
    }).pipe(Effect.provide(layer))
  })

  it.effect("idle timeout, non-stream: fails with RunTimedOut (HTTP 504) and cancels the run", () => {
    const { runs, layer } = setup([eventStream(Stream.never)])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const fiber = yield* Effect.fork(Effect.either(chat.complete(yield* request({ model: "echo" }))))
      yield* TestClock.adjust("60 seconds")
      const result = yield* Fiber.join(fiber)
      expect(Either.isLeft(result) && result.left._tag).toBe("RunTimedOut")
      expect(runs.cancelled).toEqual(["run_scripted1"])
      expect(runs.released).toEqual(["run_scripted1"])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("cancel race: the caller leaving mid-stream interrupts the run", () => {
    const { runs, layer } = setup([eventStream(Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.never)))])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const items = yield* chat.stream(yield* request({ model: "echo", stream: true }))
      const fiber = yield* Effect.fork(collect(items))
      yield* TestClock.adjust("1 second")
      yield* Fiber.interrupt(fiber)
      expect(runs.cancelled).toEqual(["run_scripted1"])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("node disconnected and broken streams end with one run_error", () => {
    const { layer } = setup([
      eventStream(Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.fail(new NodeDisconnected({ nodeId: "n1" }))))),
      eventStream(Stream.fail(new StreamClosed()))
    ])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      for (const message of ["node disconnected", "run stream closed"]) {
        const out = yield* collect(yield* chat.stream(yield* request({ model: "echo", stream: true })))
        const errors = out.filter((i) => i._tag === "Error")
        expect(errors).toHaveLength(1)
        expect(errors[0]).toMatchObject({ error: { _tag: "RunFailed", message } })
        expect(out[out.length - 1]).toBe(errors[0])
      }
    }).pipe(Effect.provide(layer))
  })

  it.scoped("no node for the model fails before anything is written (HTTP 503)", () => {
    const { layer } = setup([refuse(new NoNodeForModel({ model: "echo" }))])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const result = yield* Effect.either(chat.stream(yield* request({ model: "echo", stream: true })))
      expect(Either.isLeft(result) && result.left._tag).toBe("NoNodeForModel")
    }).pipe(Effect.provide(layer))
  })

  it.effect("every node refusing the run before its first event is a 503 for a non-stream request", () => {
    const { layer } = setup([eventStream(Stream.fail(new NodeUnavailable({ nodeId: "n1", reason: "at capacity" })))])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const result = yield* Effect.either(chat.complete(yield* request({ model: "echo" })))
      expect(Either.isLeft(result) && result.left._tag).toBe("NoNodeAccepted")
    }).pipe(Effect.provide(layer))
  })

  it.effect("strict retry: an invalid call is replayed once with attempt metadata; only the valid call is returned", () => {
    const { runs, layer } = setup([events(call("{\"city\": 1}")), events(call("{\"city\": \"Paris\"}"))])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const body = (yield* chat.complete(
        yield* request({ model: "strict", tools: [weather], metadata: { trace: "1" } })
      )) as { choices: Array<{ message: { tool_calls: Array<{ function: { arguments: string } }> }; finish_reason: string }> }
      expect(body.choices[0]?.finish_reason).toBe("tool_calls")
      expect(body.choices[0]?.message.tool_calls.map((c) => c.function.arguments)).toEqual(["{\"city\": \"Paris\"}"])
      expect(runs.submitted).toHaveLength(2)
      const [first, replay] = runs.submitted
      expect(first?.metadata).toEqual({ trace: "1" })
      expect(replay?.metadata).toMatchObject({ trace: "1", attempt: "2", failed_run_id: "run_scripted1" })
      expect(replay?.metadata["reason"]).toContain("get_weather")
      expect({ ...replay, metadata: {} }).toEqual({ ...first, metadata: {} })
      expect(runs.released).toEqual(["run_scripted1", "run_scripted2"])
    }).pipe(Effect.provide(layer))
  })

  it.effect("strict retry: invalid twice fails with tool_validation_error after toolValidationAttempts runs", () => {
    const { runs, layer } = setup([events(call("{}")), events(call("{\"city\": 3}")), events(call("{}"))])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const result = yield* Effect.either(chat.complete(yield* request({ model: "strict", tools: [weather] })))
      expect(Either.isLeft(result) && result.left._tag).toBe("ToolValidationFailed")
      expect(runs.submitted).toHaveLength(2)
    }).pipe(Effect.provide(layer))
  })

  it.effect("usage of runs that failed tool validation is counted in /metrics under that outcome", () => {
    const usage = { inputTokens: 5, outputTokens: 7 }
    const invalid = RunEvent.complete({
      finishReason: "tool_calls",
      toolCalls: [{ id: "call_1", name: "get_weather", arguments: "{}" }],
      usage,
      metadata: {}
    })
    const { layer } = setup([events(invalid), events(invalid)])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const metrics = yield* Metrics
      yield* Effect.either(chat.complete(yield* request({ model: "strict", tools: [weather] })))
      const { body } = yield* metrics.exposition
      expect(body).toContain('iop_tokens_total{model="strict",outcome="tool_validation_error",kind="output"} 14')
      expect(body).toContain('iop_runs_total{model="strict",outcome="tool_validation_error"} 2')
    }).pipe(Effect.provide(Layer.merge(layer, MetricsTest)))
  })

  it.scoped("strict stream buffer: nothing invalid is written; the retried valid call is", () => {
    const { runs, layer } = setup([events(RunEvent.delta("hmm"), call("{}")), events(call("{\"city\": \"Rome\"}"))])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const out = yield* collect(yield* chat.stream(yield* request({ model: "buffered", stream: true, tools: [weather] })))
      const deltas = chunkDeltas(out)
      expect(deltas[0]).toMatchObject({ role: "assistant" })
      expect(deltas.some((d) => d["content"] === "hmm")).toBe(false)
      expect(JSON.stringify(deltas)).toContain("Rome")
      expect(deltas[deltas.length - 1]?.finish_reason).toBe("tool_calls")
      expect(runs.submitted).toHaveLength(2)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("strict stream buffer: a retry that cannot be submitted is tool_validation_retry_error", () => {
    const { layer } = setup([events(call("{}")), refuse(new NoNodeForModel({ model: "buffered" }))])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const out = yield* collect(yield* chat.stream(yield* request({ model: "buffered", stream: true, tools: [weather] })))
      expect(out).toHaveLength(1)
      expect(out[0]).toMatchObject({ _tag: "Error", error: { _tag: "ToolValidationRetryFailed" } })
    }).pipe(Effect.provide(layer))
  })

  it.scoped("live strict stream: validates at the end and fails instead of emitting an invalid call", () => {
    const { runs, layer } = setup([events(RunEvent.delta("Let me check."), call("{\"town\": 1}"))])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const out = yield* collect(yield* chat.stream(yield* request({ model: "strict", stream: true, tools: [weather] })))
      expect(chunkDeltas(out).some((d) => "tool_calls" in d)).toBe(false)
      expect(out[out.length - 1]).toMatchObject({ _tag: "Error", error: { _tag: "ToolValidationFailed" } })
      expect(runs.submitted).toHaveLength(1)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("usage chunk after the finish chunk with include_usage", () => {
    const usage = { inputTokens: 2, outputTokens: 1, cachedInputTokens: 1 }
    const { layer } = setup([events(RunEvent.delta("x"), RunEvent.complete({ finishReason: "stop", toolCalls: [], usage, metadata: {} }))])
    return Effect.gen(function* () {
      const chat = yield* ChatCompletions
      const out = yield* collect(
        yield* chat.stream(yield* request({ model: "echo", stream: true, stream_options: { include_usage: true } }))
      )
      const last = out[out.length - 1]
      expect(last).toMatchObject({
        _tag: "Chunk",
        chunk: { choices: [], usage: { prompt_tokens: 2, completion_tokens: 1, total_tokens: 3, prompt_tokens_details: { cached_tokens: 1 } } }
      })
    }).pipe(Effect.provide(layer))
  })
})
