import * as Chat from "@effect/ai/Chat"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as OpenAiClient from "@effect/ai-openai/OpenAiClient"
import * as OpenAiLanguageModel from "@effect/ai-openai/OpenAiLanguageModel"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { chunk, completionTokens, type Script, textStream } from "../../support/fakeUpstream.js"
import { testEdge } from "./edge.js"

/**
 * `@effect/ai-openai` 0.41 (which speaks only the Responses API) pointed at an edge in this process: its
 * `OpenAiLanguageModel` decodes every event and body with its own schemas, and skips events it cannot decode,
 * so these tests see what a strict client makes of the edge's frames.
 */

const sse = (events: ReadonlyArray<object>): Script => ({ kind: "sse", events })

const GetWeather = Tool.make("GetWeather", {
  description: "Weather in a city",
  parameters: { city: Schema.String },
  success: Schema.String
})
const Weather = Toolkit.make(GetWeather)
const WeatherHandlers = Weather.toLayer({ GetWeather: ({ city }) => Effect.succeed(`sunny in ${city}`) })

const modelFor = (url: string, model = "model") =>
  OpenAiLanguageModel.layer({ model }).pipe(
    Layer.provide(OpenAiClient.layer({ apiUrl: `${url}/v1`, apiKey: Redacted.make("client-key") })),
    Layer.provide(FetchHttpClient.layer)
  )

describe("Responses API through @effect/ai-openai", () => {
  it.scopedLive("LanguageModel.generateText: the text, the finish reason and the usage", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse(textStream(["Hel", "lo"], { usage: completionTokens(5, 2) })))
      const response = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(modelFor(edge.url)))
      expect(response.text).toBe("Hello")
      expect(response.finishReason).toBe("stop")
      expect(response.usage).toMatchObject({ inputTokens: 5, outputTokens: 2, totalTokens: 7 })
    }))

  it.scopedLive("LanguageModel.streamText: text deltas, reasoning deltas and one finish", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse(textStream(["Sun", "ny"], { reasoning: ["thin", "king"], usage: completionTokens(3, 4) })))
      const parts = yield* LanguageModel.streamText({ prompt: "weather?" }).pipe(
        Stream.runCollect,
        Effect.provide(modelFor(edge.url))
      )
      const list = Array.from(parts)
      const text = list.flatMap((p) => (p.type === "text-delta" ? [p.delta] : [])).join("")
      const reasoning = list.flatMap((p) => (p.type === "reasoning-delta" ? [p.delta] : [])).join("")
      expect(text).toBe("Sunny")
      expect(reasoning).toBe("thinking")
      const finishes = list.filter((p) => p.type === "finish")
      expect(finishes).toEqual([expect.objectContaining({ reason: "stop", usage: expect.objectContaining({ inputTokens: 3, outputTokens: 4 }) })])
      // Repeated deltas collapsed: each part opened, streamed and ended in order.
      const types = list.map((p) => p.type).filter((t, i, all) => i === 0 || all[i - 1] !== t)
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
    }))

  it.scopedLive("a Toolkit tool call round trip: the call is resolved, the result goes back, the model answers", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge((_, n) =>
        n === 0
          ? sse([
            chunk({ role: "assistant", tool_calls: [{ index: 0, id: "call_w1", type: "function", function: { name: "GetWeather", arguments: "{\"city\":\"Oslo\"}" } }] }),
            chunk({ finish_reason: "tool_calls" })
          ])
          : sse(textStream(["It is sunny in Oslo."]))
      )
      const program = Effect.gen(function* () {
        const chat = yield* Chat.empty
        const first = yield* chat.generateText({ prompt: "Weather in Oslo?", toolkit: Weather })
        const second = yield* chat.generateText({ prompt: [], toolkit: Weather })
        return { first, second }
      })
      const { first, second } = yield* program.pipe(Effect.provide(Layer.merge(modelFor(edge.url), WeatherHandlers)))
      expect(first.finishReason).toBe("tool-calls")
      expect(first.toolCalls).toEqual([expect.objectContaining({ id: "call_w1", name: "GetWeather", params: { city: "Oslo" } })])
      expect(first.toolResults).toEqual([expect.objectContaining({ id: "call_w1", name: "GetWeather", result: "sunny in Oslo" })])
      expect(second.text).toBe("It is sunny in Oslo.")
      const [firstSent, secondSent] = edge.upstreamBodies()
      expect(firstSent?.["tools"]).toEqual([expect.objectContaining({ type: "function", function: expect.objectContaining({ name: "GetWeather" }) })])
      expect(secondSent?.["messages"]).toEqual([
        { role: "user", content: "Weather in Oslo?" },
        { role: "assistant", content: null, tool_calls: [{ id: "call_w1", type: "function", function: { name: "GetWeather", arguments: "{\"city\":\"Oslo\"}" } }] },
        { role: "tool", content: "\"sunny in Oslo\"", tool_call_id: "call_w1" }
      ])
    }))
})
