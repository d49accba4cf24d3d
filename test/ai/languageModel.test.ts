import * as AiError from "@effect/ai/AiError"
import * as Chat from "@effect/ai/Chat"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as EdgeAi from "../../src/ai.js"
import { RunEvent } from "../../src/index.js"
import { layerEchoModel, ScriptedProvider, TestEdge } from "../../src/testing.js"

const GetWeather = Tool.make("GetWeather", {
  description: "Weather in a city",
  parameters: { city: Schema.String },
  success: Schema.String
})
const Weather = Toolkit.make(GetWeather)

/** The handler, counting its calls. */
const weatherHandlers = (calls: Array<string>) =>
  Weather.toLayer({ GetWeather: ({ city }) => Effect.sync(() => calls.push(city)).pipe(Effect.as(`sunny in ${city}`)) })

const echo = EdgeAi.layer("echo").pipe(Layer.provideMerge(TestEdge.layer({ nodes: layerEchoModel() })))

/** The edge with a scripted model (`mine`, or `model`'s options) and the language model over it. */
const scripted = (model: Parameters<typeof ScriptedProvider.layer>[0] = "mine", config: TestEdge.Options["config"] = {}) =>
  EdgeAi.layer(typeof model === "string" ? model : "mine").pipe(
    Layer.provideMerge(TestEdge.layer({ config, nodes: ScriptedProvider.layer(model) }))
  )

const hermes = (name: string, args: object) => `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`

describe("iop-edge/ai: LanguageModel served by the edge", () => {
  it.scoped("generateText against echo: the text, the finish reason, the usage", () =>
    Effect.gen(function* () {
      const response = yield* LanguageModel.generateText({ prompt: "one two" })
      expect(response.text).toBe("one two")
      expect(response.finishReason).toBe("stop")
      expect(response.usage).toMatchObject({ inputTokens: 2, outputTokens: 2, totalTokens: 4 })
    }).pipe(Effect.provide(echo)))

  it.scoped("streamText against echo: metadata, one text block of deltas, one finish with the usage", () =>
    Effect.gen(function* () {
      const parts = Chunk.toReadonlyArray(yield* Stream.runCollect(LanguageModel.streamText({ prompt: "one two" })))
      expect(parts.flatMap((p) => (p.type === "text-delta" ? [p.delta] : [])).join("")).toBe("one two")
      const types = parts.map((p) => p.type).filter((t, i, all) => i === 0 || all[i - 1] !== t)
      expect(types).toEqual(["response-metadata", "text-start", "text-delta", "text-end", "finish"])
      expect(parts.at(-1)).toMatchObject({ reason: "stop", usage: { inputTokens: 2, outputTokens: 2, totalTokens: 4 } })
      const ids = new Set(parts.flatMap((p) => (p.type.startsWith("text-") && "id" in p ? [p.id] : [])))
      expect(ids.size).toBe(1)
    }).pipe(Effect.provide(echo)))

  it.scoped("streamText: reasoning then text, each a block of its own, deltas as the run sent them", () =>
    Effect.gen(function* () {
      const provider = yield* ScriptedProvider
      const reader = yield* Effect.fork(Stream.runCollect(LanguageModel.streamText({ prompt: "weather?" })))
      const run = yield* provider.nextRun
      for (const event of [RunEvent.reasoningDelta("thin"), RunEvent.reasoningDelta("king"), RunEvent.delta("Sun"), RunEvent.delta("ny")]) {
        yield* run.emit(event)
        yield* Effect.yieldNow()
      }
      yield* run.complete({ inputTokens: 3, outputTokens: 4, reasoningTokens: 2 })
      const parts = Chunk.toReadonlyArray(yield* Fiber.join(reader))
      expect(parts.flatMap((p) => (p.type === "reasoning-delta" ? [p.delta] : [])).join("")).toBe("thinking")
      expect(parts.flatMap((p) => (p.type === "text-delta" ? [p.delta] : [])).join("")).toBe("Sunny")
      const types = parts.map((p) => p.type).filter((t, i, all) => i === 0 || all[i - 1] !== t)
      expect(types).toEqual([
        "response-metadata",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-end",
        "finish"
      ])
      expect(parts.at(-1)).toMatchObject({ reason: "stop", usage: { inputTokens: 3, outputTokens: 4, reasoningTokens: 2 } })
    }).pipe(Effect.provide(scripted())))

  it.scoped("generateObject: the schema as a json_schema response format; the answer decoded", () =>
    Effect.gen(function* () {
      const provider = yield* ScriptedProvider
      const answer = yield* Effect.fork(LanguageModel.generateObject({
        prompt: "Oslo?",
        schema: Schema.Struct({ city: Schema.String, celsius: Schema.Number }),
        objectName: "forecast"
      }))
      const run = yield* provider.nextRun
      expect(run.request.sampling.responseFormat).toEqual({
        type: "json_schema",
        json_schema: { name: "forecast", schema: expect.objectContaining({ type: "object", required: ["city", "celsius"] }) }
      })
      yield* run.text(JSON.stringify({ city: "Oslo", celsius: 4 }))
      yield* run.complete()
      expect((yield* Fiber.join(answer)).value).toEqual({ city: "Oslo", celsius: 4 })
    }).pipe(Effect.provide(scripted())))

  it.scoped("a Toolkit round trip from Hermes markup: the edge parses the call, the handler runs, the result goes back", () => {
    const calls: Array<string> = []
    return Effect.gen(function* () {
      const provider = yield* ScriptedProvider
      const chat = yield* Chat.empty
      const first = yield* Effect.fork(chat.generateText({ prompt: "Weather in Oslo?", toolkit: Weather }))
      const run1 = yield* provider.nextRun
      expect(run1.request.tools).toEqual([{
        type: "function",
        function: {
          name: "GetWeather",
          description: "Weather in a city",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false }
        }
      }])
      expect(run1.request.toolChoice).toBe("auto")
      yield* run1.text(hermes("GetWeather", { city: "Oslo" }))
      yield* run1.complete()
      const turn1 = yield* Fiber.join(first)
      expect(turn1.finishReason).toBe("tool-calls")
      expect(turn1.toolCalls).toEqual([expect.objectContaining({ name: "GetWeather", params: { city: "Oslo" } })])
      expect(turn1.toolResults).toEqual([expect.objectContaining({ name: "GetWeather", result: "sunny in Oslo" })])
      expect(calls).toEqual(["Oslo"])

      const second = yield* Effect.fork(chat.generateText({ prompt: [], toolkit: Weather }))
      const run2 = yield* provider.nextRun
      const callId = turn1.toolCalls[0]?.id
      expect(run2.request.messages).toEqual([
        { role: "user", content: "Weather in Oslo?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: callId, type: "function", function: { name: "GetWeather", arguments: "{\"city\":\"Oslo\"}" } }]
        },
        { role: "tool", tool_call_id: callId, content: "\"sunny in Oslo\"" }
      ])
      yield* run2.text("It is sunny in Oslo.")
      yield* run2.complete()
      const turn2 = yield* Fiber.join(second)
      expect(turn2.text).toBe("It is sunny in Oslo.")
      expect(turn2.toolCalls).toEqual([])
    }).pipe(Effect.provide(Layer.merge(scripted({ id: "mine", tools: "text" }), weatherHandlers(calls))))
  })

  it.scoped("streamText with a Toolkit: a native call whole, its handler's result after it, a named tool choice", () => {
    const calls: Array<string> = []
    return Effect.gen(function* () {
      const provider = yield* ScriptedProvider
      const parts = yield* Effect.fork(Stream.runCollect(
        LanguageModel.streamText({ prompt: "Weather in Oslo?", toolkit: Weather, toolChoice: { tool: "GetWeather" } })
      ))
      const run = yield* provider.nextRun
      expect(run.request.toolChoice).toEqual({ type: "function", function: { name: "GetWeather" } })
      yield* run.emit(RunEvent.complete({
        finishReason: "tool_calls",
        toolCalls: [{ id: "call_1", name: "GetWeather", arguments: "{\"city\":\"Oslo\"}" }],
        metadata: {}
      }))
      const list = Chunk.toReadonlyArray(yield* Fiber.join(parts))
      expect(list.map((p) => p.type)).toEqual(["response-metadata", "tool-call", "tool-result", "finish"])
      expect(list[1]).toMatchObject({ id: "call_1", name: "GetWeather", params: { city: "Oslo" } })
      expect(list[2]).toMatchObject({ id: "call_1", result: "sunny in Oslo", isFailure: false })
      expect(list[3]).toMatchObject({ reason: "tool-calls" })
      expect(calls).toEqual(["Oslo"])
    }).pipe(Effect.provide(Layer.merge(scripted(), weatherHandlers(calls))))
  })

  it.scoped("a strict model's call with invalid arguments is replayed by the edge; the handler sees the valid one only", () => {
    const calls: Array<string> = []
    return Effect.gen(function* () {
      const provider = yield* ScriptedProvider
      const answer = yield* Effect.fork(LanguageModel.generateText({ prompt: "Weather in Oslo?", toolkit: Weather }))
      const run1 = yield* provider.nextRun
      yield* run1.text(hermes("GetWeather", { city: 42 }))
      yield* run1.complete()
      const run2 = yield* provider.nextRun
      expect(run2.request.metadata).toMatchObject({ attempt: "2", failed_run_id: expect.any(String) })
      expect(run2.request.replayTool).toBe("GetWeather")
      yield* run2.text(hermes("GetWeather", { city: "Oslo" }))
      yield* run2.complete()
      const response = yield* Fiber.join(answer)
      expect(response.toolCalls).toEqual([expect.objectContaining({ params: { city: "Oslo" } })])
      expect(calls).toEqual(["Oslo"])
      expect(yield* provider.runs).toHaveLength(2)
    }).pipe(Effect.provide(Layer.merge(
      scripted({ id: "mine", tools: "text", output: { strict: true } }),
      weatherHandlers(calls)
    )))
  })

  it.scoped("a strict model that stays invalid: MalformedOutput keeping ToolValidationFailed", () =>
    Effect.gen(function* () {
      const provider = yield* ScriptedProvider
      const answer = yield* Effect.fork(Effect.flip(LanguageModel.generateText({ prompt: "Weather?", toolkit: Weather })))
      for (let i = 0; i < 2; i++) {
        const run = yield* provider.nextRun
        yield* run.text(hermes("GetWeather", { town: "Oslo" }))
        yield* run.complete()
      }
      const error = yield* Fiber.join(answer)
      expect(error).toBeInstanceOf(AiError.MalformedOutput)
      expect(error).toMatchObject({ module: "EdgeLanguageModel", method: "generateText", cause: { _tag: "ToolValidationFailed" } })
      expect(error.description).toMatch(/^ToolValidationFailed: /)
    }).pipe(Effect.provide(Layer.merge(
      scripted({ id: "mine", tools: "text", output: { strict: true } }),
      weatherHandlers([])
    ))))

  it.scoped("idle timeout (TestClock): a silent run fails generateText with the mapped AiError after 30 s", () =>
    Effect.gen(function* () {
      const provider = yield* ScriptedProvider
      const outcome = yield* Effect.fork(Effect.flip(LanguageModel.generateText({ prompt: "hi" })))
      const run = yield* provider.nextRun
      yield* TestClock.adjust("29 seconds")
      expect(Option.isNone(yield* Fiber.poll(outcome))).toBe(true)
      yield* TestClock.adjust("1 second")
      const error = yield* Fiber.join(outcome)
      expect(error).toBeInstanceOf(AiError.UnknownError)
      expect(error).toMatchObject({ description: "RunTimedOut: run timed out", cause: { _tag: "RunTimedOut", bound: "idle", ms: 30_000 } })
      yield* run.cancelled
    }).pipe(Effect.provide(scripted("mine", { runs: { idleTimeoutMs: 30_000 } }))))

  it.scoped("interrupting streamText cancels the run on its provider", () =>
    Effect.gen(function* () {
      const provider = yield* ScriptedProvider
      const reader = yield* Effect.fork(Stream.runCollect(LanguageModel.streamText({ prompt: "hi" })))
      const run = yield* provider.nextRun
      yield* run.text("partial")
      expect(yield* run.state).toBe("running")
      yield* Fiber.interrupt(reader)
      yield* run.cancelled
      expect(yield* run.state).toBe("cancelled")
    }).pipe(Effect.provide(scripted())))

  it.scoped("a stream that fails after output: the stream fails with the mapped error", () =>
    Effect.gen(function* () {
      const provider = yield* ScriptedProvider
      const reader = yield* Effect.fork(Stream.runCollect(Stream.either(LanguageModel.streamText({ prompt: "hi" }))))
      const run = yield* provider.nextRun
      yield* run.text("half")
      yield* run.fail("upstream exploded")
      const read = Chunk.toReadonlyArray(yield* Fiber.join(reader))
      expect(read.flatMap((r) => (r._tag === "Right" && r.right.type === "text-delta" ? [r.right.delta] : []))).toEqual(["half"])
      const last = read.at(-1)
      expect(last?._tag === "Left" && last.left).toMatchObject({ _tag: "UnknownError", description: "RunFailed: upstream exploded" })
    }).pipe(Effect.provide(scripted())))

  it.scoped("what the edge refuses before a run is MalformedInput: an unknown model, a field out of range", () =>
    Effect.gen(function* () {
      const unknown = yield* Effect.flip(LanguageModel.generateText({ prompt: "hi" })).pipe(
        Effect.provide(EdgeAi.layer("nope").pipe(Layer.provide(TestEdge.layer({ nodes: layerEchoModel() }))))
      )
      expect(unknown).toBeInstanceOf(AiError.MalformedInput)
      expect(unknown).toMatchObject({ description: "ModelNotFound: The model \"nope\" does not exist" })
      const hot = yield* Effect.flip(LanguageModel.generateText({ prompt: "hi" })).pipe(
        Effect.provide(EdgeAi.layer("echo", { temperature: 5 }).pipe(Layer.provide(TestEdge.layer({ nodes: layerEchoModel() }))))
      )
      expect(hot).toBeInstanceOf(AiError.MalformedInput)
      expect(hot.description).toMatch(/^InvalidRequest: .*temperature/)
      const file = yield* Effect.flip(LanguageModel.generateText({
        prompt: [{ role: "user", content: [{ type: "file", mediaType: "audio/wav", data: new Uint8Array([1]) }] }]
      })).pipe(Effect.provide(echo))
      expect(file).toBeInstanceOf(AiError.MalformedInput)
      expect(file.description).toMatch(/audio\/wav/)
    }))

  it.scoped("the layer's config reaches the run: sampling fields on every request", () =>
    Effect.gen(function* () {
      const provider = yield* ScriptedProvider
      const answer = yield* Effect.fork(LanguageModel.generateText({ prompt: [{ role: "system", content: "be brief" }, { role: "user", content: "hi" }] }))
      const run = yield* provider.nextRun
      expect(run.request.sampling).toMatchObject({ temperature: 0.5, maxTokens: 16 })
      expect(run.request.messages).toEqual([{ role: "system", content: "be brief" }, { role: "user", content: "hi" }])
      yield* run.text("ok")
      yield* run.complete()
      expect((yield* Fiber.join(answer)).text).toBe("ok")
    }).pipe(Effect.provide(EdgeAi.layer("mine", { temperature: 0.5, max_tokens: 16 }).pipe(
      Layer.provideMerge(TestEdge.layer({ nodes: ScriptedProvider.layer("mine") }))
    ))))
})
