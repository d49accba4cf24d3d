import Anthropic from "@anthropic-ai/sdk"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import OpenAI from "openai"
import { OPENING_GRACE_MS } from "../../src/chat/Responder.js"
import { KEEP_ALIVE_AFTER_MS } from "../../src/dialects/Dialect.js"
import { ScriptedProvider, TestServer } from "../../src/testing.js"

/**
 * The clients users run read a stream that started at the upstream's accept and carried keep-alives (SSE comments
 * on the OpenAI APIs, `ping` on Anthropic's) before its first token, as any other: over HTTP, on the TestClock.
 */

const layer = TestServer.layer({ nodes: ScriptedProvider.layer("m") })

/** One turn of Node's event loop: the socket's bytes reach the client (no time passes on any clock). */
const turn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/** Accepts the next run, lets two keep-alives go out while it is silent, then answers `hello`. */
const silentThenHello = Effect.gen(function* () {
  const run = yield* (yield* ScriptedProvider).nextRun
  yield* run.accept
  for (const ms of [OPENING_GRACE_MS, KEEP_ALIVE_AFTER_MS, KEEP_ALIVE_AFTER_MS]) {
    yield* turn
    yield* TestClock.adjust(ms)
  }
  yield* turn
  yield* run.text("hello")
  yield* run.complete()
})

describe("keep-alives through real clients", () => {
  it.scoped("on the wire: the head, then keep-alive comments, then the text", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const raw = yield* Effect.fork(Effect.promise(async () => {
        const response = await fetch(`${server.baseURL}/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "hi" }] })
        })
        return response.text()
      }))
      yield* silentThenHello
      const text = yield* Fiber.join(raw)
      expect(text.split(": keep-alive\n\n")).toHaveLength(3)
      expect(text.indexOf(": keep-alive")).toBeGreaterThan(text.indexOf(`"role":"assistant"`))
      expect(text.indexOf("hello")).toBeGreaterThan(text.lastIndexOf(": keep-alive"))
    }).pipe(Effect.provide(layer))
  )

  it.scoped("the openai SDK: Chat Completions and Responses streams", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const openai = new OpenAI({ baseURL: server.baseURL, apiKey: "test", maxRetries: 0 })
      const chat = yield* Effect.fork(Effect.promise(async () => {
        let text = ""
        const stream = await openai.chat.completions.create({ model: "m", stream: true, messages: [{ role: "user", content: "hi" }] })
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
        return text
      }))
      yield* silentThenHello
      expect(yield* Fiber.join(chat)).toBe("hello")
      const responses = yield* Effect.fork(Effect.promise(async () => {
        let text = ""
        const stream = await openai.responses.create({ model: "m", stream: true, input: "hi" })
        for await (const event of stream) if (event.type === "response.output_text.delta") text += event.delta
        return text
      }))
      yield* silentThenHello
      expect(yield* Fiber.join(responses)).toBe("hello")
    }).pipe(Effect.provide(layer))
  )

  it.scoped("the Anthropic SDK: a Messages stream with pings", () =>
    Effect.gen(function* () {
      const server = yield* TestServer
      const anthropic = new Anthropic({ baseURL: server.url, apiKey: "test", maxRetries: 0 })
      const messages = yield* Effect.fork(Effect.promise(async () => {
        let text = ""
        const stream = anthropic.messages.stream({ model: "m", max_tokens: 16, messages: [{ role: "user", content: "hi" }] })
        for await (const event of stream) {
          if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text
        }
        return text
      }))
      yield* silentThenHello
      expect(yield* Fiber.join(messages)).toBe("hello")
    }).pipe(Effect.provide(layer))
  )
})
