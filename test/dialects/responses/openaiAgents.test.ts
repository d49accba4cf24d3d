import { describe, expect, it } from "@effect/vitest"
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool } from "@openai/agents"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { z } from "zod"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import { ScriptedProvider, TestServer } from "../../../src/testing.js"

/**
 * `@openai/agents` (the OpenAI Agents SDK) over the edge's Responses API, as its users run it: an agent with a
 * function tool, its Runner's loop (call, tool output, answer), first with the history resent whole and then
 * continued by `previousResponseId` (the stored response).
 */

setTracingDisabled(true)

const layer = TestServer.layer({ nodes: ScriptedProvider.layer("m") })

const weather = tool({
  name: "get_weather",
  description: "The weather in a city",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `12 °C in ${city}`
})

describe("@openai/agents through the edge", () => {
  it.scoped("an agent's tool loop: the call, the tool's output back, the answer; then a turn by previousResponseId", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const scripted = yield* ScriptedProvider
      const runner = new Runner({ modelProvider: new OpenAIProvider({ baseURL: server.baseURL, apiKey: "test", useResponses: true }) })
      const agent = new Agent({ name: "forecaster", instructions: "Answer with the tool.", model: "m", tools: [weather] })

      const first = yield* Effect.fork(Effect.promise(() => runner.run(agent, "Weather in Oslo?")))
      const step1 = yield* scripted.nextRun
      yield* step1.emit(RunEvent.reasoningDelta("Use the tool for Oslo."))
      yield* step1.emit(RunEvent.complete({ finishReason: "tool_calls", toolCalls: [{ name: "get_weather", arguments: `{"city":"Oslo"}` }], metadata: {} }))
      const step2 = yield* scripted.nextRun
      // The tool's output and the step-1 call (and its reasoning) came back.
      const tail = step2.request.messages.slice(-2)
      expect(tail[0]).toMatchObject({ role: "assistant", reasoning_content: "Use the tool for Oslo." })
      expect(tail[0]?.tool_calls?.[0]?.function).toEqual({ name: "get_weather", arguments: `{"city":"Oslo"}` })
      expect(tail[1]).toMatchObject({ role: "tool", content: "12 °C in Oslo" })
      yield* step2.text("It is 12 °C in Oslo.")
      yield* step2.complete({ inputTokens: 40, outputTokens: 8 })
      const result = yield* Fiber.join(first)
      expect(result.finalOutput).toBe("It is 12 °C in Oslo.")

      // The next turn, continued from the stored response.
      const previousResponseId = result.lastResponseId ?? ""
      expect(previousResponseId).toMatch(/^resp_/)
      const next = yield* Effect.fork(Effect.promise(() =>
        runner.run(agent, "And tomorrow?", { previousResponseId })))
      const step3 = yield* scripted.nextRun
      const texts = step3.request.messages.map((m) => (typeof m.content === "string" ? m.content : ""))
      expect(texts).toContain("Weather in Oslo?")
      expect(texts).toContain("It is 12 °C in Oslo.")
      expect(texts[texts.length - 1]).toBe("And tomorrow?")
      yield* step3.text("Much the same.")
      yield* step3.complete({ inputTokens: 60, outputTokens: 4 })
      expect((yield* Fiber.join(next)).finalOutput).toBe("Much the same.")
    }).pipe(Effect.provide(layer))
  )
})
