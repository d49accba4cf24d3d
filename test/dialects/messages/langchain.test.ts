import { ChatAnthropic } from "@langchain/anthropic"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { ScriptedProvider, TestServer } from "../../../src/testing.js"

/**
 * `@langchain/anthropic` as its users run it: a stream's usage comes from `message_start` (input) and
 * `message_delta` (output), so input tokens there must be the edge's best count, not 0 (issue 23).
 */

const tokens = (meta: unknown, field: string): number => {
  const value: unknown = typeof meta === "object" && meta !== null ? Reflect.get(meta, field) : undefined
  return typeof value === "number" ? value : 0
}

const layer = TestServer.layer({ nodes: ScriptedProvider.layer("m") })

describe("@langchain/anthropic through the edge", () => {
  it.scoped("a streamed answer's usage_metadata has input tokens and the upstream's output tokens", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const scripted = yield* ScriptedProvider
      const model = new ChatAnthropic({
        model: "m",
        apiKey: "test",
        anthropicApiUrl: server.url,
        maxRetries: 0,
        streaming: true,
        streamUsage: true
      })
      const prompt = "Write one short sentence about the sea, please, and nothing else at all."
      const streamed = yield* Effect.fork(Effect.promise(async () => {
        let text = ""
        const usage = { input_tokens: 0, output_tokens: 0 }
        for await (const chunk of await model.stream(prompt)) {
          if (typeof chunk.content === "string") text += chunk.content
          // The chunk's declared type loses `usage_metadata` here (it reads `undefined`); it is LangChain's UsageMetadata.
          const meta: unknown = Reflect.get(chunk, "usage_metadata")
          usage.input_tokens += tokens(meta, "input_tokens")
          usage.output_tokens += tokens(meta, "output_tokens")
        }
        return { text, usage }
      }))
      const run = yield* scripted.nextRun
      yield* run.text("The sea ")
      yield* run.text("is wide.")
      yield* run.complete({ inputTokens: 21, outputTokens: 5 })
      const { text, usage } = yield* Fiber.join(streamed)
      expect(text).toBe("The sea is wide.")
      expect(usage.input_tokens).toBeGreaterThan(0)
      expect(usage.output_tokens).toBe(5)

      // Not streamed: the upstream's figures.
      const whole = yield* Effect.fork(Effect.promise(() => new ChatAnthropic({ model: "m", apiKey: "test", anthropicApiUrl: server.url, maxRetries: 0 }).invoke(prompt)))
      const next = yield* scripted.nextRun
      yield* next.text("Calm.")
      yield* next.complete({ inputTokens: 21, outputTokens: 2 })
      const answer = yield* Fiber.join(whole)
      expect(answer.usage_metadata).toMatchObject({ input_tokens: 21, output_tokens: 2 })
    }).pipe(Effect.provide(layer))
  )
})
