import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as OpenAiProvider from "../../../src/providers/openai/OpenAiProvider.js"
import * as RunEvent from "../../../src/run/RunEvent.js"
import type { SubmitRunRequest } from "../../../src/run/SubmitRunRequest.js"
import {
  chunk,
  completionTokens,
  errorEvent,
  type FakeUpstream,
  type Handler,
  type Script,
  startFakeUpstream,
  textStream
} from "../../support/fakeUpstream.js"

const request: SubmitRunRequest = {
  model: "qwen",
  messages: [{ role: "user", content: "hi" }],
  tools: [],
  sampling: { temperature: 0.5 },
  metadata: {}
}

const fakeUpstream = (handler: Handler | Script) =>
  Effect.acquireRelease(
    Effect.promise(() => startFakeUpstream(handler)),
    (fake) => Effect.promise(() => fake.close())
  )

const providerFor = (fake: FakeUpstream, options: Partial<OpenAiProvider.Options> = {}) =>
  OpenAiProvider.make({
    baseUrl: fake.url,
    upstreamModel: "qwen2.5:7b",
    apiKey: undefined,
    toolMode: "native",
    ...options
  })

const collect = (stream: Stream.Stream<RunEvent.RunEvent, unknown>) =>
  Stream.runCollect(stream).pipe(Effect.map(Chunk.toReadonlyArray))

/** Runs the request against a fake upstream that answers every request with `script`. */
const runAgainst = (script: Handler | Script, options: Partial<OpenAiProvider.Options> = {}) =>
  Effect.gen(function*() {
    const fake = yield* fakeUpstream(script)
    const provider = yield* providerFor(fake, options)
    const events = yield* collect(provider.run(request))
    return { fake, events }
  })

const failedMessage = (events: ReadonlyArray<RunEvent.RunEvent>): string => {
  expect(events.filter(RunEvent.isTerminal)).toHaveLength(1)
  const last = events.at(-1)
  expect(last?._tag).toBe("Failed")
  return last?._tag === "Failed" ? last.message : ""
}

const waitFor = (check: () => boolean, timeoutMs: number) =>
  Effect.gen(function*() {
    const start = Date.now()
    while (!check() && Date.now() - start < timeoutMs) yield* Effect.sleep("10 millis")
    return check()
  })

describe("OpenAiProvider", () => {
  it.scopedLive("streams text: deltas, then Complete with usage and the upstream model", () =>
    Effect.gen(function*() {
      const { events, fake } = yield* runAgainst(
        { kind: "sse", events: textStream(["Hel", "lo"], { usage: completionTokens(5, 2), model: "qwen2.5:7b-q4" }) },
        { apiKey: Redacted.make("sk-up"), headers: { "x-extra": "1" } }
      )
      expect(events).toEqual([
        RunEvent.delta("Hel"),
        RunEvent.delta("lo"),
        RunEvent.complete({
          finishReason: "stop",
          toolCalls: [],
          usage: { inputTokens: 5, outputTokens: 2 },
          metadata: { upstream_model: "qwen2.5:7b-q4" }
        })
      ])
      expect(fake.requests).toHaveLength(1)
      const sent = fake.requests[0]!
      expect(sent.path).toBe("/v1/chat/completions")
      expect(sent.headers.authorization).toBe("Bearer sk-up")
      expect(sent.headers["x-extra"]).toBe("1")
      expect(sent.headers.accept).toBe("text/event-stream")
      expect(sent.body).toEqual({
        model: "qwen2.5:7b",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
        stream_options: { include_usage: true },
        temperature: 0.5
      })
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("no api key: no Authorization header; text mode is reported in metadata", () =>
    Effect.gen(function*() {
      const { events, fake } = yield* runAgainst({ kind: "sse", events: textStream(["x"]) }, { toolMode: "text" })
      expect(fake.requests[0]!.headers.authorization).toBeUndefined()
      expect(events.at(-1)).toMatchObject({ _tag: "Complete", metadata: { tool_mode: "text" } })
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("native tool calls split over deltas arrive whole in Complete", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({
        kind: "sse",
        delayMs: 2,
        events: [
          chunk({ role: "assistant", content: null }),
          chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "" } }] }),
          chunk({ tool_calls: [{ index: 0, function: { arguments: "{\"a\":" } }] }),
          chunk({ tool_calls: [{ index: 0, function: { arguments: "1}" } }] }),
          chunk({ finish_reason: "tool_calls" })
        ]
      })
      expect(events).toEqual([
        RunEvent.complete({
          finishReason: "tool_calls",
          toolCalls: [{ id: "call_1", name: "f", arguments: "{\"a\":1}" }],
          metadata: { upstream_model: "fake-model" }
        })
      ])
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("HTTP 500 with an OpenAI error body → one Failed with the status and the upstream's message", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({
        kind: "json",
        status: 500,
        body: { error: { code: 500, message: "model failed to load", type: "server_error" } }
      })
      expect(events).toHaveLength(1)
      expect(failedMessage(events)).toBe("upstream answered HTTP 500: model failed to load")
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("HTTP 429 → Failed with the status and message; a body without a message is quoted, capped", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({
        kind: "json",
        status: 429,
        body: { error: { message: "Rate limit reached for requests", type: "requests", code: "rate_limit_exceeded" } }
      })
      expect(failedMessage(events)).toBe("upstream answered HTTP 429: Rate limit reached for requests")

      const long = yield* runAgainst({ kind: "json", status: 503, body: { status: "x".repeat(2000) } })
      const message = failedMessage(long.events)
      expect(message.startsWith("upstream answered HTTP 503: {\"status\":\"xxx")).toBe(true)
      expect(message.length).toBeLessThan(600)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("a malformed event → Failed after the events before it", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({
        kind: "sse",
        events: [chunk({ content: "ok" }), "data: {\"choices\": [{\"delta\": \n\n", chunk({ content: "never" })]
      })
      expect(events[0]).toEqual(RunEvent.delta("ok"))
      expect(events).toHaveLength(2)
      expect(failedMessage(events)).toMatch(/^upstream sent an event that is not JSON/)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("an error event mid-stream → Failed with the upstream's message", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({
        kind: "sse",
        events: [chunk({ content: "a" }), errorEvent("context length exceeded")]
      })
      expect(events).toEqual([RunEvent.delta("a"), RunEvent.failed("upstream error: context length exceeded")])
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("connection reset mid-stream → Failed", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({ kind: "reset", before: [chunk({ content: "par" })] })
      expect(events[0]).toEqual(RunEvent.delta("par"))
      expect(failedMessage(events)).toMatch(/^upstream stream broke: /)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("connection refused → Failed", () =>
    Effect.gen(function*() {
      const fake = yield* Effect.promise(() => startFakeUpstream({ kind: "sse", events: [] }))
      yield* Effect.promise(() => fake.close())
      const provider = yield* providerFor(fake)
      const events = yield* collect(provider.run(request))
      expect(events).toHaveLength(1)
      expect(failedMessage(events)).toMatch(/^upstream request failed: .*ECONNREFUSED/)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("the body ends without [DONE] and without finish_reason → Failed (ended early)", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({ kind: "sse", events: [chunk({ content: "a" })], done: false })
      expect(events).toEqual([RunEvent.delta("a"), RunEvent.failed("upstream stream ended early")])
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("the body ends without [DONE] after a finish_reason → Complete", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({ kind: "sse", events: textStream(["a"]), done: false })
      expect(events.at(-1)).toMatchObject({ _tag: "Complete", finishReason: "stop" })
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("the stream ends right after its terminal event, even if the upstream keeps the connection open", () =>
    Effect.gen(function*() {
      const fake = yield* fakeUpstream({ kind: "stall", before: [...textStream(["a"]), "data: [DONE]\n\n"] })
      const provider = yield* providerFor(fake)
      const events = yield* collect(provider.run(request)).pipe(Effect.timeout("2 seconds"))
      expect(events.at(-1)).toMatchObject({ _tag: "Complete" })
      // Ending the stream closed its scope, which aborted the still-open request.
      expect(yield* waitFor(() => fake.aborted.length === 1, 1000)).toBe(true)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("interrupting the consumer aborts the upstream request within 1 s", () =>
    Effect.gen(function*() {
      const fake = yield* fakeUpstream({
        kind: "stall",
        before: [chunk({ role: "assistant", content: "" }), chunk({ content: "t" })]
      })
      const provider = yield* providerFor(fake)
      const first = yield* Deferred.make<void>()
      const fiber = yield* provider.run(request).pipe(
        Stream.tap(() => Deferred.succeed(first, undefined)),
        Stream.runDrain,
        Effect.fork
      )
      yield* Deferred.await(first)
      expect(fake.aborted).toHaveLength(0)
      const interruptedAt = Date.now()
      yield* Fiber.interrupt(fiber)
      expect(yield* waitFor(() => fake.aborted.length === 1, 1000)).toBe(true)
      expect(fake.aborted[0]!.at - interruptedAt).toBeLessThan(1000)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.scopedLive("interrupting before the response headers arrive aborts the request too", () =>
    Effect.gen(function*() {
      const received = yield* Deferred.make<void>()
      const fake = yield* fakeUpstream(() => {
        Effect.runSync(Deferred.succeed(received, undefined))
        return new Promise<Script>(() => {})
      })
      const provider = yield* providerFor(fake)
      const fiber = yield* provider.run(request).pipe(Stream.runDrain, Effect.fork)
      yield* Deferred.await(received)
      const interruptedAt = Date.now()
      yield* Fiber.interrupt(fiber)
      expect(yield* waitFor(() => fake.aborted.length === 1, 1000)).toBe(true)
      expect(fake.aborted[0]!.at - interruptedAt).toBeLessThan(1000)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))
})

describe("fakeUpstream", () => {
  it.scopedLive("answers GET /v1/models", () =>
    Effect.gen(function*() {
      const fake = yield* fakeUpstream({ kind: "sse", events: [] })
      const body = yield* Effect.promise(() => fetch(`${fake.url}/models`).then((r) => r.json()))
      expect(body).toEqual({ object: "list", data: [{ id: "fake-model", object: "model", created: 0, owned_by: "fake" }] })
    }))
})
