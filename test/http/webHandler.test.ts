import * as HttpApp from "@effect/platform/HttpApp"
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import * as Edge from "../../src/Edge.js"
import { Lifecycle } from "../../src/http/Lifecycle.js"
import { RunService } from "../../src/run/RunService.js"
import { HANG_GUARD_MS, metricSum } from "../support/e2e.js"
import { parseSse } from "../support/sse.js"
import { exposeInternals } from "../../src/compose.js"

/**
 * The edge's routes and middleware mounted behind `HttpApp.toWebHandler` (web `Request` → `Response`, no Node
 * server, no socket): what a host app on a serverless or Bun/Deno-style runtime does with them.
 */

const LIMIT = 64 * 1024
const LONG_TEXT = Array.from({ length: 2_000 }, (_, i) => `word${i}`).join(" ")

const config = (): EdgeConfig.EdgeConfigShape => {
  const base = EdgeConfig.defaultConfig()
  const echo = base.models[0]!
  return {
    ...base,
    server: { ...base.server, maxBodyBytes: LIMIT },
    models: [
      { ...echo, provider: { type: "echo", tokenDelayMs: 0 } },
      // Paced: a stream that outlives the handler's return (the response is answered before the run ends).
      { ...echo, id: "slow", provider: { type: "echo", tokenDelayMs: 20 } }
    ]
  }
}

const EdgeTest = exposeInternals(Edge.layerServices.pipe(Layer.provideMerge(EdgeConfig.layer(config()))))

/**
 * A fresh edge for one test, closed with it. Not `layer(EdgeTest)` from @effect/vitest: it assigns its own
 * `effect` and `scoped` onto vitest's shared `it`, so with `isolate: false` every later file in the worker would
 * run its `it.effect` / `it.scoped` tests on this file's runtime (without the TestClock they expect).
 */
const onEdge = <A, E>(test: Effect.Effect<A, E, Layer.Layer.Success<typeof EdgeTest>>) => Effect.provide(test, EdgeTest)

/** The app `HttpAppLive` serves (routes + edge middleware), as a web handler on the test layer's services. */
const webHandler = Effect.gen(function* () {
  const app = yield* Edge.httpApp
  const runtime = yield* Effect.runtime<Layer.Layer.Success<typeof EdgeTest>>()
  const handler = HttpApp.toWebHandlerRuntime(runtime)(app)
  return (request: Request) => Effect.promise(() => handler(request))
})

const URL_BASE = "http://127.0.0.1"

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  new Request(`${URL_BASE}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

const chat = (model: string, content: string, stream: boolean) =>
  post("/v1/chat/completions", { model, stream, messages: [{ role: "user", content }] })

const text = (response: Response) => Effect.promise(() => response.text())

/** A request body that is a web stream (no content length): `next` gives each pull's bytes, until it returns none. */
const streamedBody = (next: (pull: number) => Uint8Array | undefined) => {
  const seen = { pulls: 0, bytes: 0 }
  const cancelled = Deferred.unsafeMake<void>(FiberId.none)
  const body = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        const bytes = next(seen.pulls++)
        if (bytes === undefined) return controller.close()
        seen.bytes += bytes.length
        controller.enqueue(bytes)
      },
      cancel() {
        Deferred.unsafeDone(cancelled, Effect.void)
      }
    },
    // Nothing is pulled before the body is read.
    { highWaterMark: 0 }
  )
  return { body, seen, cancelled: Deferred.await(cancelled) }
}

const postStream = (body: ReadableStream<Uint8Array>, headers: Record<string, string> = {}) =>
  new Request(`${URL_BASE}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
    duplex: "half"
  })

const expect413 = (response: Response) =>
  Effect.gen(function* () {
    expect(response.status).toBe(413)
    expect(JSON.parse(yield* text(response))).toEqual({
      error: {
        message: `request body is larger than the limit of ${LIMIT} bytes`,
        type: "invalid_request_error",
        param: null,
        code: "request_too_large"
      }
    })
    // No connection of the edge's to close behind a web handler.
    expect(response.headers.get("connection")).toBeNull()
  })

const contentOf = (body: string) =>
  parseSse(body)
    .map((item) => {
      if (item._tag !== "Chunk") return ""
      const chunk = item.chunk as { choices: Array<{ delta: { content?: string } }> }
      return chunk.choices[0]?.delta.content ?? ""
    })
    .join("")

describe("the edge behind HttpApp.toWebHandler", () => {
  it.live("a non-stream chat completion: 200 with the echoed content", () =>
    onEdge(Effect.gen(function* () {
      const handle = yield* webHandler
      const response = yield* handle(chat("echo", "hello from a web request", false))
      expect(response.status).toBe(200)
      expect(response.headers.get("x-request-id")).toMatch(/./)
      const body = JSON.parse(yield* text(response))
      expect(body.choices[0].message.content).toBe("hello from a web request")
      expect(body.choices[0].finish_reason).toBe("stop")
    }))
  )

  it.live("a streamed chat completion, read from the web Response body: every chunk, the finish, [DONE]", () =>
    onEdge(Effect.gen(function* () {
      const handle = yield* webHandler
      const prompt = "one two three four five six seven eight"
      const response = yield* handle(chat("slow", prompt, true))
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toBe("text/event-stream")
      const body = yield* text(response)
      const items = parseSse(body)
      // The run outlives the handler's return: the request's scope must stay open until the body ends.
      expect(items.filter((item) => item._tag === "Error")).toEqual([])
      expect(contentOf(body)).toBe(prompt)
      const chunks = items.flatMap((item) => (item._tag === "Chunk" ? [item.chunk] : []))
      expect(chunks.at(-1)).toMatchObject({ choices: [{ finish_reason: "stop" }] })
      expect(items.at(-1)).toEqual({ _tag: "Done" })
      expect(body.endsWith("data: [DONE]\n\n")).toBe(true)
    }))
  )

  it.live("a /v1/messages stream (Anthropic): message_start … message_stop", () =>
    onEdge(Effect.gen(function* () {
      const handle = yield* webHandler
      const response = yield* handle(
        post(
          "/v1/messages",
          { model: "slow", max_tokens: 64, stream: true, messages: [{ role: "user", content: "hi there you" }] },
          { "anthropic-version": "2023-06-01" }
        )
      )
      expect(response.status).toBe(200)
      const body = yield* text(response)
      const events = Array.from(body.matchAll(/^event: (\S+)$/gm), (m) => m[1])
      expect(events[0]).toBe("message_start")
      expect(events.slice(-2)).toEqual(["message_delta", "message_stop"])
      expect(events).not.toContain("error")
    }))
  )

  it.live("a declared content-length over the limit: 413 in OpenAI's shape, before the body is read", () =>
    onEdge(Effect.gen(function* () {
      const handle = yield* webHandler
      // A body that never ends: only refusing it on its declared length answers.
      const { body, seen } = streamedBody(() => new Uint8Array(1024))
      yield* expect413(yield* handle(postStream(body, { "content-length": String(LIMIT + 1) })))
      expect(seen.pulls).toBe(0)
    }))
  )

  it.live("a streamed body without content-length over the limit: 413 as soon as it passes, stream cancelled", () =>
    onEdge(Effect.gen(function* () {
      const handle = yield* webHandler
      const chunk = 16 * 1024
      // A body that never ends: only refusing it as it passes the limit answers.
      const { body, seen, cancelled } = streamedBody(() => new Uint8Array(chunk).fill(0x61))
      yield* expect413(yield* handle(postStream(body)))
      yield* cancelled
      expect(seen.bytes).toBeGreaterThan(LIMIT)
      expect(seen.bytes).toBeLessThanOrEqual(LIMIT + 2 * chunk)
    }))
  )

  it.live("a streamed body with no content-length, within the limit, is read whole", () =>
    onEdge(Effect.gen(function* () {
      const handle = yield* webHandler
      const json = new TextEncoder().encode(
        JSON.stringify({ model: "echo", messages: [{ role: "user", content: "ünïcode split" }] })
      )
      // One byte a chunk: the multi-byte characters arrive split.
      const { body } = streamedBody((pull) => (pull < json.length ? json.subarray(pull, pull + 1) : undefined))
      const response = yield* handle(postStream(body))
      expect(response.status).toBe(200)
      expect(JSON.parse(yield* text(response)).choices[0].message.content).toBe("ünïcode split")
    }))
  )

  it.live("a body stream that fails while read: 400 that says the body could not be read", () =>
    onEdge(Effect.gen(function* () {
      const handle = yield* webHandler
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          controller.error(new Error("upload cut short"))
        }
      })
      const response = yield* handle(postStream(body))
      expect(response.status).toBe(400)
      const error = JSON.parse(yield* text(response)).error
      expect(error).toMatchObject({ type: "invalid_request_error", param: null })
      expect(error.message).toBe("could not read the request body: upload cut short")
    }))
  )

  it.live("a body that is not JSON: 400 that says so", () =>
    onEdge(Effect.gen(function* () {
      const handle = yield* webHandler
      const response = yield* handle(post("/v1/chat/completions", '{"model": "echo", "messages": ['))
      expect(response.status).toBe(400)
      const body = JSON.parse(yield* text(response))
      expect(body.error.type).toBe("invalid_request_error")
      expect(body.error.message).toMatch(/^request body is not valid JSON/)
    }))
  )

  it.live("an absent body: 400 that says it is not JSON", () =>
    onEdge(Effect.gen(function* () {
      const handle = yield* webHandler
      const response = yield* handle(new Request(`${URL_BASE}/v1/chat/completions`, { method: "POST" }))
      expect(response.status).toBe(400)
      expect(JSON.parse(yield* text(response)).error.message).toMatch(/^request body is not valid JSON/)
    }))
  )

  it.live("cancel: a caller that cancels the web Response body mid-stream cancels its run", () =>
    onEdge(Effect.gen(function* () {
      const handle = yield* webHandler
      const lifecycle = yield* Lifecycle
      const runs = yield* RunService
      const cancelledRuns = Effect.flatMap(handle(new Request(`${URL_BASE}/metrics`)), text).pipe(
        Effect.map((body) => metricSum(body, "iop_chat_requests_total", { model: "slow", outcome: "cancelled" }))
      )
      const before = yield* cancelledRuns
      // 2,000 tokens at 20 ms: 40 s, past the test's timeout, were the run not cancelled.
      const response = yield* handle(chat("slow", LONG_TEXT, true))
      expect(response.status).toBe(200)
      const reader = response.body!.getReader()
      const first = yield* Effect.promise(() => reader.read())
      expect(first.done).toBe(false)
      expect(yield* runs.activeRuns).toBe(1)
      yield* Effect.promise(() => reader.cancel())
      // The request is open until its scope closes; the run's finalizers run before that.
      expect(yield* lifecycle.awaitIdle(HANG_GUARD_MS)).toBe(true)
      expect(yield* runs.activeRuns).toBe(0)
      expect((yield* cancelledRuns) - before).toBe(1)
    }))
  )
})
