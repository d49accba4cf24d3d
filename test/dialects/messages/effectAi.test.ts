import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as AnthropicClient from "@effect/ai-anthropic/AnthropicClient"
import * as AnthropicLanguageModel from "@effect/ai-anthropic/AnthropicLanguageModel"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { chunk, completionTokens, type RecordedRequest, type Script, textStream } from "../../support/fakeUpstream.js"
import { messagesEdge, upstreamBody } from "./edge.js"

/**
 * `@effect/ai-anthropic` 0.27 (`AnthropicLanguageModel` over `AnthropicClient`, which decodes every response and
 * stream event with its own schemas) against the in-process edge.
 */

const GetWeather = Tool.make("GetWeather", {
  description: "The weather in a city",
  parameters: { city: Schema.String },
  success: Schema.Struct({ temperature: Schema.Number, condition: Schema.String })
})
const Weather = Toolkit.make(GetWeather)
const WeatherHandlers = Weather.toLayer({ GetWeather: ({ city }) => Effect.succeed({ temperature: city.length, condition: "sunny" }) })

const roles = (request: RecordedRequest): ReadonlyArray<unknown> => {
  const body = request.body
  const messages = typeof body === "object" && body !== null && "messages" in body ? body.messages : []
  return Array.isArray(messages) ? messages.map((m: unknown) => (typeof m === "object" && m !== null && "role" in m ? m.role : undefined)) : []
}

/** Calls GetWeather while the history has no tool result; then answers in text. */
const weatherModel = (request: RecordedRequest): Script =>
  roles(request).includes("tool")
    ? { kind: "sse", events: textStream(["It is sunny in Paris."], { usage: completionTokens(30, 6) }) }
    : {
      kind: "sse",
      events: [
        chunk({ role: "assistant", tool_calls: [{ index: 0, id: "call_w1", type: "function", function: { name: "GetWeather", arguments: "{\"city\":\"Paris\"}" } }] }),
        chunk({ finish_reason: "tool_calls" })
      ]
    }

const anthropic = (url: string) =>
  AnthropicLanguageModel.model("claude-sonnet-4-5").pipe(
    Layer.provide(AnthropicClient.layer({ apiUrl: url, apiKey: Redacted.make("client-key") })),
    Layer.provide(FetchHttpClient.layer)
  )

describe("Messages API through @effect/ai-anthropic", () => {
  it.scopedLive("LanguageModel.generateText: text, finish reason and usage", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({ kind: "sse", events: textStream(["Hello", " there"], { usage: completionTokens(9, 2) }) })
      const response = yield* LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(anthropic(edge.url)))
      expect(response.text).toBe("Hello there")
      expect(response.finishReason).toBe("stop")
      expect(response.usage.inputTokens).toBe(9)
      expect(response.usage.outputTokens).toBe(2)
      expect(upstreamBody(edge.up)).toMatchObject({ max_tokens: 4096, messages: [{ role: "user", content: "hi" }] })
    }))

  it.scopedLive("LanguageModel.streamText: the text deltas, reasoning when thinking is on, and a finish part", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({ kind: "sse", events: textStream(["Str", "eam"], { reasoning: ["hmm"], usage: completionTokens(4, 2) }) })
      const parts = yield* LanguageModel.streamText({ prompt: "hi" }).pipe(
        Stream.runCollect,
        Effect.map(Chunk.toReadonlyArray),
        Effect.provide(anthropic(edge.url))
      )
      const text = parts.map((p) => (p.type === "text-delta" ? p.delta : "")).join("")
      expect(text).toBe("Stream")
      expect(parts.some((p) => p.type === "reasoning-delta")).toBe(false)
      const finish = parts.find((p) => p.type === "finish")
      expect(finish?.type === "finish" && finish.reason).toBe("stop")
      expect(finish?.type === "finish" && finish.usage.outputTokens).toBe(2)

      const thinking = yield* LanguageModel.streamText({ prompt: "hi" }).pipe(
        Stream.runCollect,
        Effect.map(Chunk.toReadonlyArray),
        Effect.provide(
          AnthropicLanguageModel.model("model", { thinking: { type: "enabled", budget_tokens: 1024 } }).pipe(
            Layer.provide(AnthropicClient.layer({ apiUrl: edge.url, apiKey: Redacted.make("client-key") })),
            Layer.provide(FetchHttpClient.layer)
          )
        )
      )
      expect(thinking.map((p) => (p.type === "reasoning-delta" ? p.delta : "")).join("")).toBe("hmm")
      expect(thinking.map((p) => (p.type === "text-delta" ? p.delta : "")).join("")).toBe("Stream")
    }))

  it.scopedLive("a Toolkit round trip: the tool call runs its handler, and its result goes back for the answer", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge(weatherModel)
      const program = Effect.gen(function* () {
        const question = Prompt.make("What is the weather in Paris?")
        const first = yield* LanguageModel.generateText({ prompt: question, toolkit: Weather })
        expect(first.finishReason).toBe("tool-calls")
        expect(first.toolCalls.map((c) => [c.name, c.params])).toEqual([["GetWeather", { city: "Paris" }]])
        expect(first.toolResults.map((r) => r.result)).toEqual([{ temperature: 5, condition: "sunny" }])
        const second = yield* LanguageModel.generateText({
          prompt: Prompt.merge(question, Prompt.fromResponseParts(first.content)),
          toolkit: Weather
        })
        return second.text
      })
      const answer = yield* program.pipe(Effect.provide(WeatherHandlers), Effect.provide(anthropic(edge.url)))
      expect(answer).toBe("It is sunny in Paris.")
      expect(edge.up.requests).toHaveLength(2)
      expect(upstreamBody(edge.up, 0)["tools"]).toMatchObject([{ type: "function", function: { name: "GetWeather" } }])
      expect(upstreamBody(edge.up, 1)["messages"]).toEqual([
        { role: "user", content: "What is the weather in Paris?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_w1", type: "function", function: { name: "GetWeather", arguments: "{\"city\":\"Paris\"}" } }]
        },
        { role: "tool", tool_call_id: "call_w1", content: "{\"temperature\":5,\"condition\":\"sunny\"}" }
      ])
    }))
})
