import * as http from "node:http"
import * as net from "node:net"
import type { AddressInfo } from "node:net"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as HashMap from "effect/HashMap"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as OpenAiProvider from "../../../src/providers/openai/OpenAiProvider.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import type { SubmitRunRequest } from "../../../src/protocol/SubmitRunRequest.js"
import {
  chunk,
  completionTokens,
  errorEvent,
  type Handler,
  type Script,
  sseText,
  startFakeUpstream,
  textStream
} from "../../support/fakeUpstream.js"
import { collectEvents, makeTestSink } from "./testSink.js"

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

const providerFor = (fake: { readonly url: string }, options: Partial<OpenAiProvider.Options> = {}) =>
  OpenAiProvider.make({
    baseUrl: fake.url,
    upstreamModel: "qwen2.5:7b",
    apiKey: undefined,
    toolMode: "native",
    ...options
  })

/** Runs the request against a fake upstream that answers every request with `script`. */
const runAgainst = (script: Handler | Script, options: Partial<OpenAiProvider.Options> = {}) =>
  Effect.gen(function*() {
    const fake = yield* fakeUpstream(script)
    const provider = yield* providerFor(fake, options)
    const events = yield* collectEvents(provider, request)
    return { fake, events }
  })

const failedMessage = (events: ReadonlyArray<RunEvent.RunEvent>): string => {
  expect(events.filter(RunEvent.isTerminal)).toHaveLength(1)
  const last = events.at(-1)
  expect(last?._tag).toBe("Failed")
  return last?._tag === "Failed" ? last.message : ""
}

/** Polls until `check` holds; `timeoutMs` only guards against a hang, it is no budget. */
const waitFor = (check: () => boolean, timeoutMs: number) =>
  Effect.gen(function*() {
    const start = Date.now()
    while (!check() && Date.now() - start < timeoutMs) yield* Effect.sleep("10 millis")
    return check()
  })

const deltas = (...texts: ReadonlyArray<string>) => texts.map(RunEvent.delta)

const upstreamDispatcher = NodeHttpClient.dispatcherLayer

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
          metadata: { upstream_model: "qwen2.5:7b-q4", constraint: "none" }
        })
      ])
      expect(fake.requests).toHaveLength(1)
      const sent = fake.requests[0]!
      expect(sent.path).toBe("/v1/chat/completions")
      expect(sent.headers.authorization).toBe("Bearer sk-up")
      expect(sent.headers["x-extra"]).toBe("1")
      expect(sent.headers.accept).toBe("text/event-stream")
      expect(sent.headers["content-type"]).toBe("application/json")
      expect(sent.body).toEqual({
        model: "qwen2.5:7b",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
        stream_options: { include_usage: true },
        temperature: 0.5
      })
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("no api key: no Authorization header; text mode and the constraint (none) are reported in metadata", () =>
    Effect.gen(function*() {
      const { events, fake } = yield* runAgainst({ kind: "sse", events: textStream(["x"]) }, { toolMode: "text" })
      expect(fake.requests[0]!.headers.authorization).toBeUndefined()
      expect(events.at(-1)).toMatchObject({ _tag: "Complete", metadata: { tool_mode: "text", constraint: "none" } })
    }).pipe(Effect.provide(upstreamDispatcher)))

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
          metadata: { upstream_model: "fake-model", constraint: "none" }
        })
      ])
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("a native tool call streaming (no event before its Complete) tells the sink it progresses, a role chunk does not", () =>
    Effect.gen(function*() {
      const role = yield* fakeUpstream({ kind: "stall", before: [sseText([chunk({ role: "assistant", content: null })], false)] })
      const roleSink = yield* makeTestSink()
      yield* (yield* providerFor(role)).start(request, roleSink)
      expect(yield* waitFor(() => roleSink.accepts.length > 0, 2000)).toBe(true)
      const calling = yield* fakeUpstream({
        kind: "stall",
        before: [sseText([chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "{" } }] })], false)]
      })
      const sink = yield* makeTestSink()
      yield* (yield* providerFor(calling)).start(request, sink)
      expect(yield* waitFor(() => sink.progressed.length > 0, 2000)).toBe(true)
      expect([sink.progressed, sink.batches]).toEqual([[0], []])
      expect([roleSink.progressed, roleSink.batches]).toEqual([[], []])
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("HTTP 500 with an OpenAI error body → one Failed with the status and the upstream's message", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({
        kind: "json",
        status: 500,
        body: { error: { code: 500, message: "model failed to load", type: "server_error" } }
      })
      expect(events).toHaveLength(1)
      expect(failedMessage(events)).toBe("upstream answered HTTP 500: model failed to load")
    }).pipe(Effect.provide(upstreamDispatcher)))

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
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("an error answer with a huge body: its start (16 KiB) is quoted, capped", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({ kind: "json", status: 502, body: { junk: "y".repeat(4_000_000) } })
      const message = failedMessage(events)
      expect(message).toMatch(/^upstream answered HTTP 502: \{"junk":"yyy/)
      expect(message.length).toBeLessThan(600)
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("a malformed event → Failed after the events before it", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({
        kind: "sse",
        events: [chunk({ content: "ok" }), "data: {\"choices\": [{\"delta\": \n\n", chunk({ content: "never" })]
      })
      expect(events[0]).toEqual(RunEvent.delta("ok"))
      expect(events).toHaveLength(2)
      expect(failedMessage(events)).toMatch(/^upstream sent an event that is not JSON/)
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("a chunk of the wrong shape → Failed naming the field", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({ kind: "sse", events: [chunk({ content: "ok" }), { choices: "nope" }] })
      expect(events[0]).toEqual(RunEvent.delta("ok"))
      expect(failedMessage(events)).toBe(
        "upstream sent a malformed chunk (choices: expected an array or null, got string)"
      )
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("an error event mid-stream → Failed with the upstream's message", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({
        kind: "sse",
        events: [chunk({ content: "a" }), errorEvent("context length exceeded")]
      })
      expect(events).toEqual([RunEvent.delta("a"), RunEvent.failed("upstream error: context length exceeded")])
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("connection reset mid-stream → Failed", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({ kind: "reset", before: [chunk({ content: "par" })] })
      expect(events[0]).toEqual(RunEvent.delta("par"))
      expect(failedMessage(events)).toMatch(/^upstream stream broke: /)
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("connection refused → Failed", () =>
    Effect.gen(function*() {
      const fake = yield* Effect.promise(() => startFakeUpstream({ kind: "sse", events: [] }))
      yield* Effect.promise(() => fake.close())
      const provider = yield* providerFor(fake)
      const events = yield* collectEvents(provider, request)
      expect(events).toHaveLength(1)
      // The cause (and the upstream's address) goes to the log, not into the event the client sees.
      expect(failedMessage(events)).toBe("upstream unreachable")
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("a base URL that is not a URL → Failed, no request", () =>
    Effect.gen(function*() {
      const provider = yield* providerFor({ url: "not a url" })
      const events = yield* collectEvents(provider, request)
      expect(failedMessage(events)).toBe("upstream request failed: invalid base URL")
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("a stale pooled connection closed before any answer is retried once on a fresh one", () =>
    Effect.gen(function*() {
      // A raw server: the first connection is closed as soon as the request arrives, the second is answered.
      const answer = sseText(textStream(["ok"]))
      let connections = 0
      const server = net.createServer((socket) => {
        const index = connections++
        socket.once("data", () => {
          if (index === 0) socket.destroy()
          else {
            socket.end(
              "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n" +
                `content-length: ${Buffer.byteLength(answer)}\r\n\r\n${answer}`
            )
          }
        })
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
      )
      const { port } = server.address() as AddressInfo
      const provider = yield* providerFor({ url: `http://127.0.0.1:${port}/v1` })
      const events = yield* collectEvents(provider, request)
      expect(events).toEqual([
        RunEvent.delta("ok"),
        RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: { upstream_model: "fake-model", constraint: "none" } })
      ])
      expect(connections).toBe(2)
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("the body ends without [DONE] and without finish_reason → Failed (ended early)", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({ kind: "sse", events: [chunk({ content: "a" })], done: false })
      expect(events).toEqual([RunEvent.delta("a"), RunEvent.failed("upstream stream ended early")])
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("the body ends without [DONE] after a finish_reason → Complete", () =>
    Effect.gen(function*() {
      const { events } = yield* runAgainst({ kind: "sse", events: textStream(["a"]), done: false })
      expect(events.at(-1)).toMatchObject({ _tag: "Complete", finishReason: "stop" })
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("the run ends right after its terminal event, even if the upstream keeps the connection open", () =>
    Effect.gen(function*() {
      const fake = yield* fakeUpstream({ kind: "stall", before: [...textStream(["a"]), "data: [DONE]\n\n"] })
      const provider = yield* providerFor(fake)
      const events = yield* collectEvents(provider, request).pipe(Effect.timeout("2 seconds"))
      expect(events.at(-1)).toMatchObject({ _tag: "Complete" })
      // The rest of the body may drain for a while (its connection would go back to the pool); one that never
      // ends is given up, which aborts the still-open request.
      expect(yield* waitFor(() => fake.aborted.length === 1, 5000)).toBe(true)
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("a finished response gives its connection back to the pool: six runs in a row use at most two", () =>
    Effect.gen(function*() {
      // `[DONE]`, then the end of the body a little later (as a real server's last write may come).
      const fake = yield* fakeUpstream({
        kind: "sse",
        events: [...textStream(["a", "b"]), "data: [DONE]\n\n", ": end\n\n"],
        delayMs: 20,
        done: false
      })
      const provider = yield* providerFor(fake)
      for (let i = 0; i < 6; i++) {
        const events = yield* Effect.scoped(collectEvents(provider, request))
        expect(events.at(-1)).toMatchObject({ _tag: "Complete" })
      }
      expect(fake.requests).toHaveLength(6)
      expect(fake.aborted).toEqual([])
      // A run ends at `[DONE]`, a moment before its body does: the next run may open a second connection while
      // the first drains, never one per run (a destroyed body would make it six).
      expect(fake.connections()).toBeLessThanOrEqual(2)
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("one emit per upstream read: three events in one write → one batch of three", () =>
    Effect.gen(function*() {
      const fake = yield* fakeUpstream({
        kind: "stall",
        before: [sseText([chunk({ content: "a" }), chunk({ content: "b" }), chunk({ content: "c" })], false)]
      })
      const provider = yield* providerFor(fake)
      const sink = yield* makeTestSink()
      yield* provider.start(request, sink)
      expect(yield* waitFor(() => sink.batches.length > 0, 2000)).toBe(true)
      yield* Effect.sleep("50 millis")
      expect(sink.batches).toEqual([deltas("a", "b", "c")])

      // A whole answer in one write: one batch, terminal included, then the sink is ended.
      const whole = yield* fakeUpstream({ kind: "stall", before: [sseText(textStream(["x", "y"]))] })
      const wholeSink = yield* makeTestSink()
      yield* (yield* providerFor(whole)).start(request, wholeSink)
      yield* Deferred.await(wholeSink.ended)
      expect(wholeSink.batches).toHaveLength(1)
      expect(wholeSink.batches[0]).toEqual([
        ...deltas("x", "y"),
        RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: { upstream_model: "fake-model", constraint: "none" } })
      ])
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("backpressure: emit → false pauses the body until the sink's onReady calls back", () =>
    Effect.gen(function*() {
      const fake = yield* fakeUpstream({
        kind: "sse",
        delayMs: 10,
        events: ["a", "b", "c", "d", "e"].map((content) => chunk({ content }))
      })
      const provider = yield* providerFor(fake)
      // The reader falls behind at the first batch.
      const sink = yield* makeTestSink({ ready: (_, index) => index > 0 })
      yield* provider.start(request, sink)
      expect(yield* waitFor(() => sink.resumes.length === 1, 2000)).toBe(true)
      // The upstream writes everything while the body is paused; none of it is delivered.
      expect(yield* waitFor(() => fake.finished.length === 1, 2000)).toBe(true)
      yield* Effect.sleep("50 millis")
      expect(sink.batches).toEqual([deltas("a")])
      expect(yield* Deferred.isDone(sink.ended)).toBe(false)

      sink.resumes[0]!()
      yield* Deferred.await(sink.ended)
      expect(sink.events()).toEqual([
        ...deltas("a", "b", "c", "d", "e"),
        RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: { upstream_model: "fake-model", constraint: "none" } })
      ])
      expect(sink.resumes).toHaveLength(1)
      expect(sink.afterEnd).toEqual([])
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("cancel mid-stream: closing the run scope aborts the upstream request, nothing emitted after", () =>
    Effect.gen(function*() {
      const fake = yield* fakeUpstream({
        kind: "sse",
        delayMs: 20,
        events: Array.from({ length: 50 }, (_, i) => chunk({ content: `t${i}` }))
      })
      const provider = yield* providerFor(fake)
      const first = yield* Deferred.make<void>()
      const sink = yield* makeTestSink({ onEmit: () => Deferred.unsafeDone(first, Exit.void) })
      const scope = yield* Scope.make()
      yield* provider.start(request, sink).pipe(Scope.extend(scope))
      yield* Deferred.await(first)
      expect(fake.aborted).toHaveLength(0)
      yield* Scope.close(scope, Exit.void)
      const emitted = sink.batches.length
      // Event-driven: the upstream sees the abort (the 1 s bound of the contract is measured by `npm run bench`).
      expect(yield* waitFor(() => fake.aborted.length === 1, 10_000)).toBe(true)
      yield* Effect.sleep("100 millis")
      expect(sink.batches).toHaveLength(emitted)
      expect(sink.afterEnd).toEqual([])
      expect(sink.events().filter(RunEvent.isTerminal)).toEqual([])
      expect(fake.finished).toHaveLength(0)
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("closing the run's scope before the response headers arrive aborts the request too", () =>
    Effect.gen(function*() {
      const received = yield* Deferred.make<void>()
      const fake = yield* fakeUpstream(() => {
        Deferred.unsafeDone(received, Exit.void)
        return new Promise<Script>(() => {})
      })
      const provider = yield* providerFor(fake)
      const sink = yield* makeTestSink()
      const scope = yield* Scope.make()
      yield* provider.start(request, sink).pipe(Scope.extend(scope))
      yield* Deferred.await(received)
      yield* Scope.close(scope, Exit.void)
      // Event-driven: the upstream sees the abort (the 1 s bound of the contract is measured by `npm run bench`).
      expect(yield* waitFor(() => fake.aborted.length === 1, 10_000)).toBe(true)
      expect(sink.batches).toEqual([])
    }).pipe(Effect.provide(upstreamDispatcher)))
})

describe("fakeUpstream", () => {
  it.scopedLive("answers GET /v1/models", () =>
    Effect.gen(function*() {
      const fake = yield* fakeUpstream({ kind: "sse", events: [] })
      const body = yield* Effect.promise(() => fetch(`${fake.url}/models`).then((r) => r.json()))
      expect(body).toEqual({ object: "list", data: [{ id: "fake-model", object: "model", created: 0, owned_by: "fake" }] })
    }))

})

describe("OpenAiProvider: upstream error answers", () => {
    /** An upstream that answers every request with `status`, `headers` and the JSON `body`. */
    const answering = (status: number, body: unknown, headers: Record<string, string> = {}) =>
      Effect.acquireRelease(
        Effect.promise(() =>
          new Promise<{ readonly url: string; readonly server: http.Server }>((resolve) => {
            const server = http.createServer((req, res) => {
              req.resume()
              req.on("end", () => res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body)))
            })
            server.listen(0, "127.0.0.1", () =>
              resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, server })
            )
          })
        ),
        ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
      )

    const failedWith = (status: number, body: unknown, headers: Record<string, string> = {}, options: Partial<OpenAiProvider.Options> = {}) =>
      Effect.gen(function*() {
        const upstream = yield* answering(status, body, headers)
        const events = yield* collectEvents(yield* providerFor(upstream, options), request)
        expect(events).toHaveLength(1)
        const last = events[0]
        return last?._tag === "Failed" ? last : expect.unreachable("not Failed")
      })

    it.scopedLive("400 context_length_exceeded → Failed with the upstream's status, code and message", () =>
      Effect.gen(function*() {
        const failed = yield* failedWith(400, {
          error: { message: "This model's maximum context length is 8192 tokens", type: "invalid_request_error", code: "context_length_exceeded" }
        })
        expect(failed).toEqual(
          RunEvent.failed("upstream answered HTTP 400: This model's maximum context length is 8192 tokens", {
            status: 400,
            message: "This model's maximum context length is 8192 tokens",
            code: "context_length_exceeded"
          })
        )
      }).pipe(Effect.provide(upstreamDispatcher)))

    it.scopedLive("429 → Failed with the upstream's Retry-After (seconds, or retry-after-ms rounded up)", () =>
      Effect.gen(function*() {
        const body = { error: { message: "Rate limit reached", type: "requests", code: "rate_limit_exceeded" } }
        const seconds = yield* failedWith(429, body, { "retry-after": "7" })
        expect(seconds.upstream).toEqual({ status: 429, message: "Rate limit reached", code: "rate_limit_exceeded", retryAfter: 7 })
        const ms = yield* failedWith(429, body, { "retry-after-ms": "1200" })
        expect(ms.upstream?.retryAfter).toBe(2)
        const none = yield* failedWith(429, { error: "busy" })
        expect(none.upstream).toEqual({ status: 429, message: "busy" })
      }).pipe(Effect.provide(upstreamDispatcher)))

    it.scopedLive("413 and 5xx carry their status; a numeric code (llama.cpp) is not a code", () =>
      Effect.gen(function*() {
        expect((yield* failedWith(413, { error: { message: "too big", code: 413 } })).upstream).toEqual({ status: 413, message: "too big" })
        expect((yield* failedWith(503, { error: { message: "loading" } }, { "retry-after": "3" })).upstream).toEqual({
          status: 503,
          message: "loading",
          retryAfter: 3
        })
      }).pipe(Effect.provide(upstreamDispatcher)))

    it.scopedLive("a 401 that echoes the Authorization header: the edge's key never reaches the event", () =>
      Effect.gen(function*() {
        const key = "sk-up-SECRET-0123456789"
        const failed = yield* failedWith(
          401,
          { error: { message: `Invalid header 'Authorization: Bearer ${key}' (key ${key})`, code: "invalid_api_key" } },
          {},
          { apiKey: Redacted.make(key) }
        )
        expect(JSON.stringify(failed)).not.toContain("SECRET")
        expect(failed.upstream).toMatchObject({ status: 401, code: "invalid_api_key" })
        expect(failed.upstream?.message).toBe("Invalid header 'Authorization: Bearer [redacted]' (key [redacted])")

        // A key that looks like nothing in particular is still scrubbed, also past the message's cut.
        const plain = "plain-upstream-password"
        const long = yield* failedWith(
          403,
          { detail: `${"x".repeat(495)} ${plain} ${"y".repeat(3000)}` },
          {},
          { apiKey: Redacted.make(plain) }
        )
        expect(JSON.stringify(long)).not.toContain("plain-up")
        expect(new TextEncoder().encode(long.message).length).toBeLessThanOrEqual(1024)
      }).pipe(Effect.provide(upstreamDispatcher)))

    it.scopedLive("upstream text is clipped to 1 KiB of UTF-8 and scrubbed, also in a mid-stream error event", () =>
      Effect.gen(function*() {
        const wide = yield* failedWith(400, { error: { message: "é".repeat(5000) } })
        expect(new TextEncoder().encode(wide.message).length).toBeLessThanOrEqual(1024)
        expect(new TextEncoder().encode(wide.upstream?.message ?? "").length).toBeLessThanOrEqual(1024)
        const { events } = yield* runAgainst(
          { kind: "sse", events: [chunk({ content: "a" }), errorEvent("bad auth Bearer sk-up-99999999")] },
          { apiKey: Redacted.make("sk-up-99999999") }
        )
        expect(events).toEqual([RunEvent.delta("a"), RunEvent.failed("upstream error: bad auth Bearer [redacted]")])
      }).pipe(Effect.provide(upstreamDispatcher)))

    it.scopedLive("connection refused: the client's message says 'upstream unreachable', the address is logged only", () =>
      Effect.gen(function*() {
        const logged: Array<string> = []
        const logger = Logger.make(({ annotations, message }) => {
          logged.push(`${String(message)} ${JSON.stringify(Object.fromEntries(HashMap.toEntries(annotations)))}`)
        })
        const fake = yield* Effect.promise(() => startFakeUpstream({ kind: "sse", events: [] }))
        yield* Effect.promise(() => fake.close())
        const events = yield* collectEvents(yield* providerFor(fake), request).pipe(
          Effect.provide(Logger.replace(Logger.defaultLogger, logger))
        )
        expect(events).toEqual([RunEvent.transportFailed("upstream unreachable", "unreachable")])
        expect(JSON.stringify(events)).not.toContain("127.0.0.1")
        expect(yield* waitFor(() => logged.length > 0, 1000)).toBe(true)
        expect(logged.join("\n")).toMatch(/upstream request failed.*ECONNREFUSED.*127\.0\.0\.1/)
      }).pipe(Effect.provide(upstreamDispatcher)))
})

describe("OpenAiProvider: accept", () => {
  it.scopedLive("a 2xx answer is accepted once, before its first batch; a 4xx or an unreachable upstream never", () =>
    Effect.gen(function*() {
      const fake = yield* fakeUpstream({ kind: "sse", events: textStream(["a", "b"]), delayMs: 5 })
      const sink = yield* makeTestSink()
      yield* (yield* providerFor(fake)).start(request, sink)
      yield* Deferred.await(sink.ended)
      expect(sink.events().at(-1)).toMatchObject({ _tag: "Complete" })
      expect(sink.accepts).toEqual([0])

      const rejecting = yield* fakeUpstream({ kind: "json", status: 400, body: { error: { message: "bad" } } })
      const rejected = yield* makeTestSink()
      yield* (yield* providerFor(rejecting)).start(request, rejected)
      yield* Deferred.await(rejected.ended)
      expect(rejected.events().at(-1)).toMatchObject({ _tag: "Failed" })
      expect(rejected.accepts).toEqual([])

      const gone = yield* Effect.promise(() => startFakeUpstream({ kind: "sse", events: [] }))
      yield* Effect.promise(() => gone.close())
      const unreachable = yield* makeTestSink()
      yield* (yield* providerFor(gone)).start(request, unreachable)
      yield* Deferred.await(unreachable.ended)
      expect(unreachable.events()).toEqual([RunEvent.transportFailed("upstream unreachable", "unreachable")])
      expect(unreachable.accepts).toEqual([])
    }).pipe(Effect.provide(upstreamDispatcher)))
})

describe("OpenAiProvider: upstream abort and drain", () => {
  /**
   * An upstream that answers 200, writes `head`, then `filler` again and again for as long as the client reads.
   * `closed` completes, when the client has gone, with the bytes written after `head`: a client that aborts at
   * once leaves what the sockets' buffers hold; one that drains reads on.
   */
  const flooding = (head: string, filler: string) =>
    Effect.gen(function*() {
      const closed = yield* Deferred.make<number>()
      const server = http.createServer((req, res) => {
        req.resume()
        req.on("end", () => {
          let written = 0
          res.on("close", () => Deferred.unsafeDone(closed, Exit.succeed(written)))
          res.writeHead(200, { "content-type": "text/event-stream" })
          const pump = (): void => {
            while (!res.destroyed) {
              written += filler.length
              if (!res.write(filler)) return void res.once("drain", pump)
            }
          }
          if (res.write(head)) pump()
          else res.once("drain", pump)
        })
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () =>
          Effect.async<void>((resume) => {
            server.closeAllConnections()
            server.close(() => resume(Effect.void))
          })
      )
      return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, closed }
    })

  // Past this, the client read on after the failure: the sockets' buffers on both sides hold far less.
  const BUFFERED = 64 * 1024 * 1024
  const KIB = "x".repeat(64 * 1024)

  /** Runs against a flooding upstream: the run's events and the bytes written after `head` before it saw close. */
  const runFlooded = (head: string, filler: string) =>
    Effect.gen(function*() {
      const upstream = yield* flooding(head, filler)
      const events = yield* collectEvents(yield* providerFor(upstream), request)
      const after = yield* Deferred.await(upstream.closed)
      return { events, after }
    })

  it.scopedLive("an event over the size cap (one 9 MB line) → Failed, and the upstream is aborted at once", () =>
    Effect.gen(function*() {
      const { after, events } = yield* runFlooded(`data: ${"x".repeat(9_000_000)}`, KIB)
      expect(failedMessage(events)).toBe("upstream sent an event longer than 8388608 characters")
      expect(after).toBeLessThan(BUFFERED)
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("9 MB of data lines without a blank line → Failed, and the upstream is aborted at once", () =>
    Effect.gen(function*() {
      const line = `data: ${"x".repeat(64 * 1024 - 7)}\n`
      const { after, events } = yield* runFlooded(line.repeat(144), line)
      expect(failedMessage(events)).toBe("upstream sent an event longer than 8388608 characters")
      expect(after).toBeLessThan(BUFFERED)
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("an upstream error event mid-stream → Failed, and the upstream is aborted at once, not drained", () =>
    Effect.gen(function*() {
      const head = sseText([chunk({ content: "a" }), errorEvent("out of memory")], false)
      const { after, events } = yield* runFlooded(head, `: ${KIB}\n\n`)
      expect(events).toEqual([RunEvent.delta("a"), RunEvent.failed("upstream error: out of memory")])
      expect(after).toBeLessThan(BUFFERED)
    }).pipe(Effect.provide(upstreamDispatcher)))

  it.scopedLive("[DONE] then an endless flood: at most the drain's byte bound is read, then the upstream is aborted", () =>
    Effect.gen(function*() {
      const { after, events } = yield* runFlooded(sseText(textStream(["a"])), `: ${KIB}\n\n`)
      expect(events.at(-1)).toMatchObject({ _tag: "Complete" })
      expect(after).toBeLessThan(BUFFERED)
    }).pipe(Effect.provide(upstreamDispatcher)))
})
