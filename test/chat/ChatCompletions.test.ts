import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { Metrics } from "../../src/observability/Metrics.js"
import { NodeDisconnected, NodeUnavailable, NoNodeForModel, StreamClosed } from "../../src/protocol/errors.js"
import { NodeId } from "../../src/protocol/RunEvent.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"
import { type RunHandle, RunService } from "../../src/run/RunService.js"
import { ScriptedProvider, ScriptedRunService, Step, TestEdge } from "../../src/testing.js"
import { jsonBody, sseBody } from "../support/chatCompletionsBodies.js"
import { scriptedChat, weather } from "../support/scriptedChat.js"
import { parseSse, type StreamItem } from "../support/sse.js"
import { exposeInternals } from "../../src/compose.js"

const { request, setup } = scriptedChat({ plain: "echo", toolValidationAttempts: 2 })

const { events, eventStream, refuse } = ScriptedRunService

/** The whole edge (the real run plane, its idle watchdog) with one scripted provider serving every model. */
const overRunPlane = (script: Iterable<Step.Step>) =>
  exposeInternals(TestEdge.layer({ nodes: ScriptedProvider.layer(["echo", "strict", "buffered"], { script }) }))

/** Every run the scripted provider got was stopped on it before it ended (cancelled, not left running). */
const everyRunCancelled = Effect.gen(function* () {
  const runs = yield* (yield* ScriptedProvider).runs
  expect(runs.length).toBeGreaterThan(0)
  for (const run of runs) expect(yield* run.state).toBe("cancelled")
})

/** A run plane whose runs deliver their first batch, after which the next read dies: a defect below the session. */
const defectAfterFirstBatch = (defect: Error) => {
  const failing = (handle: RunHandle): RunHandle => {
    let delivered = false
    const read = () => {
      if (delivered) throw defect
      const r = handle.read()
      if (r !== undefined) delivered = true
      return r
    }
    const take = Effect.suspend(() =>
      delivered ? Effect.die(defect) : Effect.tap(handle.take, () => Effect.sync(() => (delivered = true)))
    )
    return { ...handle, read, take }
  }
  return (inner: Layer.Layer<RunService>): Layer.Layer<RunService> =>
    Layer.effect(RunService, Effect.map(RunService, (runs) => ({ ...runs, submit: (request) => Effect.map(runs.submit(request), failing) }))).pipe(
      Layer.provide(inner)
    )
}

const collect = (body: Stream.Stream<Uint8Array>) =>
  Stream.runCollect(Stream.decodeText(body)).pipe(Effect.map((texts) => parseSse(Chunk.join(texts, ""))))

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

/** The items before `[DONE]`, checking that `[DONE]` ends the stream exactly once. */
const untilDone = (out: ReadonlyArray<StreamItem>) => {
  expect(out.filter((i) => i._tag === "Done")).toHaveLength(1)
  expect(out[out.length - 1]?._tag).toBe("Done")
  return out.slice(0, -1)
}

describe("ChatCompletions", () => {
  it.scoped("idle timeout: 59.9 s without an event keeps the stream open, 60 s ends it with `run timed out` and cancels the run", () => {
    const layer = overRunPlane([Step.text("a"), Step.stall])
    return Effect.gen(function* () {
      const body = yield* sseBody(yield* request({ model: "echo", stream: true }))
      const fiber = yield* Effect.fork(collect(body))
      yield* TestClock.adjust("59900 millis")
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      yield* TestClock.adjust("100 millis")
      const out = untilDone(yield* Fiber.join(fiber))
      expect(out[out.length - 1]).toEqual({ _tag: "Error", error: { type: "run_error", message: "run timed out" } })
      expect(out.filter((i) => i._tag === "Error")).toHaveLength(1)
    }).pipe(
      Effect.scoped,
      Effect.zipRight(everyRunCancelled),
      Effect.provide(layer)
    )
  })

  it.scoped("idle timeout restarts on every event (it is not a deadline)", () => {
    const slow = ["a", "b", "c"].flatMap((text) => [Step.sleep("50 seconds"), Step.text(text)])
    const layer = overRunPlane([...slow, Step.complete()])
    return Effect.gen(function* () {
      // Nothing is written (the stream is not even returned) before the run's first batch, 50 s in.
      const fiber = yield* Effect.fork(
        Effect.flatMap(sseBody(yield* request({ model: "echo", stream: true })), collect)
      )
      for (let i = 0; i < 3; i++) yield* TestClock.adjust("50 seconds")
      const out = yield* Fiber.join(fiber)
      expect(chunkDeltas(untilDone(out)).map((d) => d["content"] ?? d.finish_reason)).toEqual(["", "a", "b", "c", "stop"])
    }).pipe(Effect.provide(layer))
  })

  it.effect("idle timeout, non-stream: fails with RunTimedOut (HTTP 504) and cancels the run", () => {
    const layer = overRunPlane([Step.stall])
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(Effect.either(Effect.scoped(jsonBody(yield* request({ model: "echo" })))))
      yield* TestClock.adjust("60 seconds")
      const result = yield* Fiber.join(fiber)
      expect(Either.isLeft(result) && result.left._tag).toBe("RunTimedOut")
      expect(yield* (yield* ScriptedProvider).runs).toHaveLength(1)
      yield* everyRunCancelled
    }).pipe(Effect.provide(layer))
  })

  it.scoped("cancel race: the caller leaving mid-stream interrupts the run", () => {
    const { runs, layer } = setup([eventStream(Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.never)))])
    return Effect.gen(function* () {
      const fiber = yield* Effect.fork(
        Effect.scoped(Effect.flatMap(sseBody(yield* request({ model: "echo", stream: true })), collect))
      )
      yield* TestClock.adjust("1 second")
      yield* Fiber.interrupt(fiber)
      expect(runs.cancelled).toEqual(["run_scripted1"])
      expect(runs.released).toEqual(["run_scripted1"])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("node disconnected and broken streams end with one run_error; broken before any output, the stream fails (HTTP 502)", () => {
    const { layer } = setup([
      eventStream(Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.fail(new NodeDisconnected({ nodeId: NodeId.make("n1") }))))),
      eventStream(Stream.fail(new StreamClosed())),
      events(RunEvent.delta("no terminal"))
    ])
    return Effect.gen(function* () {
      const runs = [
        Effect.flatMap(sseBody(yield* request({ model: "echo", stream: true })), collect),
        Effect.flip(sseBody(yield* request({ model: "echo", stream: true }))),
        Effect.flatMap(sseBody(yield* request({ model: "echo", stream: true })), collect)
      ] as const
      const first = untilDone(yield* runs[0])
      expect(first.filter((i) => i._tag === "Error")).toEqual([{ _tag: "Error", error: { type: "run_error", message: "node disconnected" } }])
      // Nothing was written yet: the broken run is the stream's failure, answered as a JSON 502.
      const failed = yield* runs[1]
      expect(failed._tag === "RunFailed" && failed.message).toBe("run stream closed")
      for (const message of ["run stream closed"]) {
        const out = untilDone(yield* runs[2])
        const errors = out.filter((i) => i._tag === "Error")
        expect(errors).toEqual([{ _tag: "Error", error: { type: "run_error", message } }])
        expect(out[out.length - 1]).toBe(errors[0])
      }
    }).pipe(Effect.provide(layer))
  })

  it.scoped("no node for the model fails before anything is written (HTTP 503)", () => {
    const { layer } = setup([refuse(new NoNodeForModel({ model: "echo" }))])
    return Effect.gen(function* () {
      const result = yield* Effect.either(sseBody(yield* request({ model: "echo", stream: true })))
      expect(Either.isLeft(result) && result.left._tag).toBe("NoNodeForModel")
    }).pipe(Effect.provide(layer))
  })

  it.scoped("every node refusing the run is a 503 before anything is written, stream or not", () => {
    const refusal = new NodeUnavailable({ nodeId: NodeId.make("n1"), reason: "at capacity" })
    const { layer } = setup([refuse(refusal), refuse(refusal)])
    return Effect.gen(function* () {
      const body = yield* Effect.either(jsonBody(yield* request({ model: "echo" })))
      expect(Either.isLeft(body) && body.left._tag).toBe("NodeUnavailable")
      const stream = yield* Effect.either(sseBody(yield* request({ model: "echo", stream: true })))
      expect(Either.isLeft(stream) && stream.left._tag).toBe("NodeUnavailable")
    }).pipe(Effect.provide(layer))
  })

  it.scoped("strict retry: an invalid call is replayed once with attempt metadata and the tool to blame; only the valid call is returned", () => {
    const { runs, layer } = setup([events(call("{\"city\": 1}")), events(call("{\"city\": \"Paris\"}"))])
    return Effect.gen(function* () {
      const body = yield* jsonBody(yield* request({ model: "strict", tools: [weather], metadata: { trace: "1" } }))
      expect(body.choices[0]?.finish_reason).toBe("tool_calls")
      expect(body.choices[0]?.message.tool_calls?.map((c) => c.function.arguments)).toEqual(["{\"city\": \"Paris\"}"])
      expect(runs.submitted).toHaveLength(2)
      const [first, replay] = runs.submitted
      expect(first?.metadata).toEqual({ trace: "1" })
      expect(replay?.metadata).toMatchObject({ trace: "1", attempt: "2", failed_run_id: "run_scripted1" })
      expect(replay?.metadata["reason"]).toContain("get_weather")
      // The replay is the same request, but for its metadata and the tool whose call was invalid.
      expect(first?.replayTool).toBeUndefined()
      expect(replay?.replayTool).toBe("get_weather")
      expect({ ...replay, metadata: {}, replayTool: undefined }).toEqual({ ...first, metadata: {}, replayTool: undefined })
      expect(runs.released).toEqual(["run_scripted1", "run_scripted2"])
    }).pipe(Effect.provide(layer))
  })

  describe("tool_choice and parallel_tool_calls, held for a model that is not strict and an upstream that cannot constrain", () => {
    const text = (t: string) => events(RunEvent.delta(t), RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} }))
    const hermes = (city: string) => `<tool_call>{"name": "get_weather", "arguments": {"city": "${city}"}}</tool_call>`
    const twoCalls = RunEvent.complete({
      finishReason: "tool_calls",
      toolCalls: [
        { id: "call_1", name: "get_weather", arguments: "{\"city\": \"Oslo\"}" },
        { id: "call_2", name: "get_weather", arguments: "{\"city\": \"Rome\"}" }
      ],
      metadata: {}
    })

    it.scoped("required: a reply without a call is replayed (attempt metadata), and the call is the answer", () => {
      const { runs, layer } = setup([text("I would rather chat."), events(call("{\"city\": \"Paris\"}"))])
      return Effect.gen(function* () {
        const body = yield* jsonBody(yield* request({ model: "echo", tools: [weather], tool_choice: "required" }))
        expect(body.choices[0]?.finish_reason).toBe("tool_calls")
        expect(runs.submitted).toHaveLength(2)
        expect(runs.submitted[1]?.metadata).toMatchObject({ attempt: "2" })
        expect(runs.submitted[1]?.metadata["reason"]).toContain("required")
        // No one tool is to blame: the replay is exact.
        expect(runs.submitted[1]).not.toHaveProperty("replayTool")
      }).pipe(Effect.provide(layer))
    })

    it.scoped("required: no call within the attempts is a typed error", () => {
      const { runs, layer } = setup([text("no"), text("still no"), text("never")])
      return Effect.gen(function* () {
        const result = yield* Effect.either(jsonBody(yield* request({ model: "echo", tools: [weather], tool_choice: "required" })))
        expect(Either.isLeft(result) && result.left._tag).toBe("ToolValidationFailed")
        expect(runs.submitted).toHaveLength(2)
      }).pipe(Effect.provide(layer))
    })

    it.scoped("named: a call to another function is replayed; only the named one is answered", () => {
      const other = RunEvent.complete({
        finishReason: "tool_calls",
        toolCalls: [{ id: "call_1", name: "get_time", arguments: "{}" }],
        metadata: {}
      })
      const { runs, layer } = setup([events(other), events(call("{\"city\": \"Oslo\"}"))])
      return Effect.gen(function* () {
        const body = yield* jsonBody(yield* request({
          model: "echo",
          tools: [weather, { type: "function", function: { name: "get_time", parameters: { type: "object" } } }],
          tool_choice: { type: "function", function: { name: "get_weather" } }
        }))
        expect(body.choices[0]?.message.tool_calls?.map((c) => c.function.name)).toEqual(["get_weather"])
        expect(runs.submitted).toHaveLength(2)
        // The replay asks for a valid call of the named tool (a provider that can constrain does so).
        expect(runs.submitted[0]).not.toHaveProperty("replayTool")
        expect(runs.submitted[1]?.replayTool).toBe("get_weather")
      }).pipe(Effect.provide(layer))
    })

    it.scoped("none: tool-call markup stays the text it is, no call", () => {
      const { runs, layer } = setup([text(`Like this: ${hermes("Oslo")}`)])
      return Effect.gen(function* () {
        const body = yield* jsonBody(yield* request({ model: "echo", tools: [weather], tool_choice: "none" }))
        expect(body.choices[0]?.message.content).toBe(`Like this: ${hermes("Oslo")}`)
        expect(body.choices[0]?.message.tool_calls ?? []).toEqual([])
        expect(body.choices[0]?.finish_reason).toBe("stop")
        expect(runs.submitted).toHaveLength(1)
      }).pipe(Effect.provide(layer))
    })

    it.scoped("parallel_tool_calls: false: at most one call is answered (the first), for an upstream that made two", () => {
      const { layer } = setup([events(twoCalls)])
      return Effect.gen(function* () {
        const body = yield* jsonBody(yield* request({ model: "echo", tools: [weather], parallel_tool_calls: false }))
        expect(body.choices[0]?.message.tool_calls?.map((c) => c.function.arguments)).toEqual(["{\"city\": \"Oslo\"}"])
      }).pipe(Effect.provide(layer))
    })

    it.scoped("parallel_tool_calls: false holds on a stream too (text-mode markup of two calls)", () => {
      const { layer } = setup([text(hermes("Oslo") + hermes("Rome"))])
      return Effect.gen(function* () {
        const body = yield* sseBody(yield* request({ model: "echo", stream: true, tools: [weather], parallel_tool_calls: false }))
        const text = JSON.stringify(untilDone(yield* collect(body)))
        expect(text.match(/"name":"get_weather"/g)?.length).toBe(1)
        expect(text).toContain("Oslo")
        expect(text).not.toContain("Rome")
      }).pipe(Effect.provide(layer))
    })
  })

  it.scoped("strict retry: invalid twice fails with tool_validation_error after toolValidationAttempts runs", () => {
    const { runs, layer } = setup([events(call("{}")), events(call("{\"city\": 3}")), events(call("{}"))])
    return Effect.gen(function* () {
      const result = yield* Effect.either(jsonBody(yield* request({ model: "strict", tools: [weather] })))
      expect(Either.isLeft(result) && result.left._tag).toBe("ToolValidationFailed")
      expect(runs.submitted).toHaveLength(2)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("usage of runs that failed tool validation is counted in /metrics under that outcome", () => {
    const usage = { inputTokens: 5, outputTokens: 7 }
    const invalid = RunEvent.complete({
      finishReason: "tool_calls",
      toolCalls: [{ id: "call_1", name: "get_weather", arguments: "{}" }],
      usage,
      metadata: {}
    })
    const { layer } = setup([events(invalid), events(invalid)])
    return Effect.gen(function* () {
      const metrics = yield* Metrics
      yield* Effect.either(Effect.scoped(jsonBody(yield* request({ model: "strict", tools: [weather] }))))
      const { body } = yield* metrics.exposition
      expect(body).toContain('iop_tokens_total{api="chat_completions",model="strict",outcome="tool_validation_error",kind="output"} 14')
      expect(body).toContain('iop_runs_total{model="strict",outcome="tool_validation_error"} 2')
      expect(body).toContain('iop_chat_requests_total{api="chat_completions",model="strict",stream="false",outcome="tool_validation_error"} 1')
    }).pipe(Effect.provide(layer))
  })

  it.scoped("strict stream buffer: nothing invalid is written; the retried valid call is", () => {
    const { runs, layer } = setup([events(RunEvent.delta("hmm"), call("{}")), events(call("{\"city\": \"Rome\"}"))])
    return Effect.gen(function* () {
      const out = untilDone(yield* collect(yield* sseBody(yield* request({ model: "buffered", stream: true, tools: [weather] }))))
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
      const out = untilDone(yield* collect(yield* sseBody(yield* request({ model: "buffered", stream: true, tools: [weather] }))))
      // The role chunk, then the error alone: no output of a run that did not validate is written.
      expect(out).toHaveLength(2)
      expect(chunkDeltas(out.slice(0, 1))[0]).toMatchObject({ role: "assistant" })
      expect(out[1]).toMatchObject({ _tag: "Error", error: { type: "tool_validation_retry_error" } })
    }).pipe(Effect.provide(layer))
  })

  it.scoped("live strict stream: validates at the end and fails instead of emitting an invalid call", () => {
    const { runs, layer } = setup([events(RunEvent.delta("Let me check."), call("{\"town\": 1}"))])
    return Effect.gen(function* () {
      const out = untilDone(yield* collect(yield* sseBody(yield* request({ model: "strict", stream: true, tools: [weather] }))))
      expect(chunkDeltas(out).some((d) => "tool_calls" in d)).toBe(false)
      expect(out[out.length - 1]).toMatchObject({ _tag: "Error", error: { type: "tool_validation_error" } })
      expect(runs.submitted).toHaveLength(1)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("usage chunk after the finish chunk with include_usage", () => {
    const usage = { inputTokens: 2, outputTokens: 1, cachedInputTokens: 1 }
    const { layer } = setup([events(RunEvent.delta("x"), RunEvent.complete({ finishReason: "stop", toolCalls: [], usage, metadata: {} }))])
    return Effect.gen(function* () {
      const out = untilDone(yield* collect(
        yield* sseBody(yield* request({ model: "echo", stream: true, stream_options: { include_usage: true } }))
      ))
      const last = out[out.length - 1]
      expect(last).toMatchObject({
        _tag: "Chunk",
        chunk: { choices: [], usage: { prompt_tokens: 2, completion_tokens: 1, total_tokens: 3, prompt_tokens_details: { cached_tokens: 1 } } }
      })
    }).pipe(Effect.provide(layer))
  })

  it.scoped("one response path: a live stream, a strict-buffered stream and a non-stream request of one script agree", () => {
    const script = () =>
      events(
        RunEvent.reasoningDelta("thinking"),
        RunEvent.delta("Let me <tool_call>{\"name\": \"get_weather\", \"argu"),
        RunEvent.delta("ments\": {\"city\": \"Oslo\"}}</tool_call> check."),
        RunEvent.complete({ finishReason: "stop", toolCalls: [], usage: { inputTokens: 3, outputTokens: 9 }, metadata: {} })
      )
    const { layer } = setup([script(), script(), script()])
    return Effect.gen(function* () {
      const ask = { tools: [weather], stream_options: { include_usage: true }, include_reasoning: true }
      const live = untilDone(yield* collect(yield* sseBody(yield* request({ model: "strict", stream: true, ...ask }))))
      const buffered = untilDone(yield* collect(yield* sseBody(yield* request({ model: "buffered", stream: true, ...ask }))))
      const body = yield* jsonBody(yield* request({ model: "strict", ...ask }))
      const summary = (items: ReadonlyArray<StreamItem>) => {
        const deltas = chunkDeltas(items)
        return {
          content: deltas.map((d) => d["content"] ?? "").join(""),
          calls: deltas.flatMap((d) => (Array.isArray(d["tool_calls"]) ? d["tool_calls"].map((c: { function: unknown }) => c.function) : [])),
          finish: deltas[deltas.length - 1]?.finish_reason,
          usage: items.flatMap((i) => (i._tag === "Chunk" && typeof i.chunk === "object" && i.chunk !== null && "usage" in i.chunk ? [i.chunk.usage] : []))[0]
        }
      }
      const choice = body.choices[0]
      const expected = {
        content: "Let me  check.",
        calls: [{ name: "get_weather", arguments: "{\"city\":\"Oslo\"}" }],
        finish: "tool_calls",
        usage: { prompt_tokens: 3, completion_tokens: 9, total_tokens: 12 }
      }
      expect(summary(live)).toEqual(expected)
      expect(summary(buffered)).toEqual(expected)
      expect({
        content: choice?.message.content,
        calls: choice?.message.tool_calls?.map((c) => c.function),
        finish: choice?.finish_reason,
        usage: body.usage
      }).toEqual(expected)
      expect(choice?.message.refusal).toBeNull()
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a defect mid-stream still ends the stream with one run_error and [DONE]", () => {
    const { layer } = setup(
      [eventStream(Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.never)))],
      defectAfterFirstBatch(new Error("bug"))
    )
    return Effect.gen(function* () {
      const out = untilDone(yield* collect(yield* sseBody(yield* request({ model: "echo", stream: true }))))
      expect(out.filter((i) => i._tag === "Error")).toEqual([{ _tag: "Error", error: { type: "run_error", message: "internal error" } }])
    }).pipe(Effect.provide(layer))
  })

  describe("upstream rejections", () => {
    const contextTooLong = RunEvent.failed("upstream answered HTTP 400: too many tokens", {
      status: 400,
      message: "too many tokens",
      code: "context_length_exceeded"
    })
    const rateLimited = RunEvent.failed("upstream answered HTTP 429: slow down", { status: 429, message: "slow down", retryAfter: 7 })

    it.scoped("an upstream 4xx as the run's first batch fails the stream before anything is written: live, buffered and non-stream", () => {
      const { layer } = setup([events(contextTooLong), events(contextTooLong), events(contextTooLong)])
      return Effect.gen(function* () {
          const expected = { _tag: "UpstreamRejected", status: 400, code: "context_length_exceeded", message: "too many tokens", retryAfter: null }
        expect(yield* Effect.flip(Effect.scoped(sseBody(yield* request({ model: "echo", stream: true }))))).toMatchObject(expected)
        expect(yield* Effect.flip(Effect.scoped(sseBody(yield* request({ model: "buffered", stream: true }))))).toMatchObject(expected)
        expect(yield* Effect.flip(Effect.scoped(jsonBody(yield* request({ model: "echo" }))))).toMatchObject(expected)
        const { body } = yield* (yield* Metrics).exposition
        expect(body).toContain('iop_chat_requests_total{api="chat_completions",model="echo",stream="true",outcome="error"} 1')
        expect(body).toContain('iop_chat_requests_total{api="chat_completions",model="echo",stream="false",outcome="error"} 1')
        expect(body).toContain('iop_runs_total{model="echo",outcome="error"} 2')
      }).pipe(Effect.provide(layer))
    })

    it.scoped("an upstream 5xx (or a Failed without an upstream answer) stays a run_error RunFailed", () => {
      const { layer } = setup([
        events(RunEvent.failed("upstream answered HTTP 503: loading", { status: 503, message: "loading", retryAfter: 3 })),
        events(RunEvent.failed("upstream answered HTTP 400: old node"))
      ])
      return Effect.gen(function* () {
          const server = yield* Effect.flip(sseBody(yield* request({ model: "echo", stream: true })))
        expect(server).toMatchObject({ _tag: "RunFailed", reason: "upstream answered HTTP 503: loading" })
        const old = yield* Effect.flip(jsonBody(yield* request({ model: "echo" })))
        expect(old).toMatchObject({ _tag: "RunFailed", reason: "upstream answered HTTP 400: old node" })
      }).pipe(Effect.provide(layer))
    })

    it.scoped("an upstream rejection after output was written is one SSE error event of its type, then [DONE]", () => {
      const { layer } = setup([
        eventStream(Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.fromEffect(Effect.as(Effect.sleep("1 second"), rateLimited))))),
        eventStream(Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.fromEffect(Effect.as(Effect.sleep("1 second"), contextTooLong)))))
      ])
      return Effect.gen(function* () {
          const play = (model: string) =>
          Effect.gen(function* () {
            const fiber = yield* Effect.fork(Effect.flatMap(sseBody(yield* request({ model, stream: true })), collect))
            yield* TestClock.adjust("1 second")
            return untilDone(yield* Fiber.join(fiber))
          })
        const limited = yield* play("echo")
        expect(chunkDeltas(limited)[0]).toMatchObject({ role: "assistant" })
        expect(limited.at(-1)).toEqual({ _tag: "Error", error: { type: "rate_limit_error", message: "slow down", code: "rate_limit_exceeded" } })
        const tooLong = yield* play("echo")
        expect(tooLong.at(-1)).toEqual({
          _tag: "Error",
          error: { type: "invalid_request_error", message: "too many tokens", code: "context_length_exceeded" }
        })
      }).pipe(Effect.provide(layer))
    })

    it.scoped("a stream with no first event within idleTimeoutMs fails with RunTimedOut (HTTP 504) before anything is written", () => {
      const layer = overRunPlane([Step.stall])
      return Effect.gen(function* () {
          const fiber = yield* Effect.fork(Effect.flip(sseBody(yield* request({ model: "echo", stream: true }))))
        yield* TestClock.adjust("59900 millis")
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        yield* TestClock.adjust("100 millis")
        expect((yield* Fiber.join(fiber))._tag).toBe("RunTimedOut")
      }).pipe(
        Effect.scoped,
        Effect.zipRight(everyRunCancelled),
        Effect.provide(layer)
      )
    })
  })
})
