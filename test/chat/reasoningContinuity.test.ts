import Anthropic from "@anthropic-ai/sdk"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import OpenAI from "openai"
import { Metrics } from "../../src/observability/Metrics.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"
import { ScriptedProvider, TestServer } from "../../src/testing.js"

/**
 * Reasoning continuity (`reasoning.continuity`): a turn a client sends back without the reasoning the edge produced
 * for it goes upstream with it again, found by its tool-call id or its text, for the same caller only.
 */

const layer = TestServer.layer({
  config: { server: { apiKeys: ["sk-a", "sk-b"] } },
  nodes: ScriptedProvider.layer([{ id: "thinker", reasoning: { continuity: true } }, { id: "plain" }])
})

const weather = {
  type: "function" as const,
  function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }
}

describe("reasoning continuity", () => {
  it.scoped("a tool-call turn sent back without its reasoning (Chat Completions) gets it back, by the call's id", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const scripted = yield* ScriptedProvider
      const openai = new OpenAI({ baseURL: server.baseURL, apiKey: "sk-a", maxRetries: 0 })
      const ask = (messages: Array<OpenAI.ChatCompletionMessageParam>) =>
        Effect.promise(() => openai.chat.completions.create({ model: "thinker", stream: true, tools: [weather], messages }).then(async (stream) => {
          const calls: Array<{ id: string; name: string }> = []
          for await (const chunk of stream) {
            for (const call of chunk.choices[0]?.delta.tool_calls ?? []) if (call.id !== undefined) calls.push({ id: call.id, name: call.function?.name ?? "" })
          }
          return calls
        }))
      const first = yield* Effect.fork(ask([{ role: "user", content: "Weather in Oslo?" }]))
      const run1 = yield* scripted.nextRun
      yield* run1.emit(RunEvent.reasoningDelta("The user wants Oslo's weather; "), RunEvent.reasoningDelta("call the tool."))
      yield* run1.emit(RunEvent.complete({ finishReason: "tool_calls", toolCalls: [{ name: "get_weather", arguments: `{"city":"Oslo"}` }], metadata: {} }))
      const calls = yield* Fiber.join(first)
      expect(calls).toHaveLength(1)
      const id = calls[0]?.id ?? ""

      // Turn 2, as the SDK's users write it: the assistant turn has the call and no reasoning.
      const history: Array<OpenAI.ChatCompletionMessageParam> = [
        { role: "user", content: "Weather in Oslo?" },
        { role: "assistant", content: null, tool_calls: [{ id, type: "function", function: { name: "get_weather", arguments: `{"city":"Oslo"}` } }] },
        { role: "tool", tool_call_id: id, content: "12 °C" }
      ]
      const second = yield* Effect.fork(ask(history))
      const run2 = yield* scripted.nextRun
      expect(run2.request.messages[1]?.reasoning_content).toBe("The user wants Oslo's weather; call the tool.")
      yield* run2.text("12 °C in Oslo.")
      yield* run2.complete()
      yield* Fiber.join(second)

      // Another key sending the same turn gets nothing of the first caller's reasoning.
      const other = new OpenAI({ baseURL: server.baseURL, apiKey: "sk-b", maxRetries: 0 })
      const third = yield* Effect.fork(Effect.promise(() => other.chat.completions.create({ model: "thinker", tools: [weather], messages: history })))
      const run3 = yield* scripted.nextRun
      expect(run3.request.messages[1]?.reasoning_content).toBeUndefined()
      yield* run3.complete()
      yield* Fiber.join(third)

      const metrics = yield* Metrics
      const exposition = (yield* metrics.exposition).body
      expect(exposition).toContain(`iop_reasoning_continuity_total{model="thinker",match="tool_call"} 1`)
      expect(exposition).toContain(`iop_reasoning_continuity_total{model="thinker",match="miss"} 1`)
    }).pipe(Effect.provide(layer))
  )

  it.scoped("a text turn sent back without its thinking (Anthropic Messages) gets it back, by its text", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const scripted = yield* ScriptedProvider
      const anthropic = new Anthropic({ baseURL: server.url, apiKey: "sk-a", maxRetries: 0 })
      const first = yield* Effect.fork(Effect.promise(() =>
        anthropic.messages.create({ model: "thinker", max_tokens: 100, messages: [{ role: "user", content: "Name a prime." }] })))
      const run1 = yield* scripted.nextRun
      yield* run1.emit(RunEvent.reasoningDelta("Small primes: 2, 3, 5, 7."), RunEvent.delta("Seven is\na prime. "))
      yield* run1.complete()
      const answer = yield* Fiber.join(first)
      const text = answer.content.flatMap((block) => (block.type === "text" ? [block.text] : [])).join("")
      expect(text).toBe("Seven is\na prime. ")

      // A client that keeps only the text (trimmed) of the turn.
      const second = yield* Effect.fork(Effect.promise(() =>
        anthropic.messages.create({
          model: "thinker",
          max_tokens: 100,
          messages: [
            { role: "user", content: "Name a prime." },
            { role: "assistant", content: text.trim() },
            { role: "user", content: "Another?" }
          ]
        })))
      const run2 = yield* scripted.nextRun
      expect(run2.request.messages[1]?.reasoning_content).toBe("Small primes: 2, 3, 5, 7.")
      yield* run2.complete()
      yield* Fiber.join(second)
    }).pipe(Effect.provide(layer))
  )

  it.scoped("a model without continuity sends the turn as the client wrote it", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const scripted = yield* ScriptedProvider
      const openai = new OpenAI({ baseURL: server.baseURL, apiKey: "sk-a", maxRetries: 0 })
      const ask = (messages: Array<OpenAI.ChatCompletionMessageParam>) =>
        Effect.promise(() => openai.chat.completions.create({ model: "plain", messages }))
      const first = yield* Effect.fork(ask([{ role: "user", content: "hi" }]))
      const run1 = yield* scripted.nextRun
      yield* run1.emit(RunEvent.reasoningDelta("hm"), RunEvent.delta("hello"))
      yield* run1.complete()
      yield* Fiber.join(first)
      const second = yield* Effect.fork(ask([{ role: "user", content: "hi" }, { role: "assistant", content: "hello" }, { role: "user", content: "again" }]))
      const run2 = yield* scripted.nextRun
      expect(run2.request.messages[1]?.reasoning_content).toBeUndefined()
      yield* run2.complete()
      yield* Fiber.join(second)
    }).pipe(Effect.provide(layer))
  )
})
