import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import OpenAI from "openai"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { layerHttp } from "../../src/Edge.js"
import { chunk, sseText, textStream } from "../support/fakeUpstream.js"

/**
 * Upstream errors through the official `openai` SDK against an in-process edge whose model points at a
 * scripted upstream: what the SDK makes of them (error class, code) and whether it retries them.
 */

interface Answer {
  readonly status: number
  readonly headers?: Record<string, string>
  readonly body: string
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}): Answer => ({
  status,
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body)
})
const sse = (events: ReadonlyArray<object>): Answer => ({
  status: 200,
  headers: { "content-type": "text/event-stream" },
  body: sseText(events)
})

/** An upstream answering the n-th chat request with `script(n)`; it counts the requests. */
const upstream = (script: (n: number) => Answer) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ readonly url: string; readonly requests: () => number; readonly server: http.Server }>((resolve) => {
        let requests = 0
        const server = http.createServer((req, res) => {
          req.resume()
          req.on("end", () => {
            // Only chat requests (a strict request's provider may first ask GET /props and the like: none here).
            if (req.method !== "POST") return void res.writeHead(404).end()
            const answer = script(requests++)
            res.writeHead(answer.status, answer.headers).end(answer.body)
          })
        })
        server.listen(0, "127.0.0.1", () =>
          resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, requests: () => requests, server })
        )
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.close(() => resolve())
          server.closeAllConnections()
        })
      )
  )

const UPSTREAM_KEY = "sk-edge-upstream-SECRET-42"

/** An edge (in process, on an ephemeral port) serving `model` (plain) and `strict` from `baseUrl`; an SDK client for it. */
const edgeFor = (baseUrl: string) =>
  Effect.gen(function* () {
    const provider = { type: "openai", baseUrl, apiKey: UPSTREAM_KEY }
    const config = Either.getOrThrow(
      decodeConfigJson("test", {
        runs: { toolValidationAttempts: 3 },
        log: { level: "none" },
        models: [{ id: "model", provider }, { id: "strict", provider, output: { strict: true } }]
      })
    )
    const layer = layerHttp.pipe(
      Layer.provide(EdgeConfig.layer(config)),
      Layer.provide(NodeHttpClient.dispatcherLayer),
      Layer.provideMerge(NodeHttpServer.layerTest),
      Layer.provide(Logger.minimumLogLevel(LogLevel.None))
    )
    const context = yield* Layer.build(layer)
    const address = (yield* Effect.provide(HttpServer.HttpServer, context)).address
    const port = address._tag === "TcpAddress" ? address.port : 0
    return (options: { readonly maxRetries?: number } = {}) =>
      new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "client-key", ...options })
  })

const messages = [{ role: "user" as const, content: "hi" }]

const caught = <A>(promise: () => Promise<A>) =>
  Effect.promise(() => promise().then((value) => Either.right(value), (error: unknown) => Either.left(error)))

const apiError = (result: Either.Either<unknown, unknown>): InstanceType<typeof OpenAI.APIError> => {
  expect(Either.isLeft(result)).toBe(true)
  const error = Either.isLeft(result) ? result.left : undefined
  expect(error).toBeInstanceOf(OpenAI.APIError)
  return error instanceof OpenAI.APIError ? error : expect.unreachable("not an APIError")
}

const contextTooLong = json(400, {
  error: {
    message: "This model's maximum context length is 8192 tokens",
    type: "invalid_request_error",
    param: "messages",
    code: "context_length_exceeded"
  }
})

describe("upstream errors through the openai SDK", () => {
  it.scopedLive("an upstream 400 context_length_exceeded is a BadRequestError with that code, stream and non-stream, not retried", () =>
    Effect.gen(function* () {
      const up = yield* upstream(() => contextTooLong)
      const client = (yield* edgeFor(up.url))()
      for (const stream of [false, true]) {
        const error = apiError(
          yield* caught(async () => {
            const answer = await client.chat.completions.create({ model: "model", messages, stream })
            if (stream && Symbol.asyncIterator in answer) for await (const _ of answer) void _
            return answer
          })
        )
        expect(error).toBeInstanceOf(OpenAI.BadRequestError)
        expect(error.status).toBe(400)
        expect(error.code).toBe("context_length_exceeded")
        expect(error.type).toBe("invalid_request_error")
        expect(error.message).toContain("maximum context length is 8192 tokens")
        expect(error.headers?.get("x-should-retry")).toBe("false")
      }
      expect(up.requests()).toBe(2)
    }))

  it.scopedLive("an upstream 429 is a 429 with its Retry-After (maxRetries 0), and the SDK retries it per Retry-After", () =>
    Effect.gen(function* () {
      const limited = json(429, { error: { message: "Rate limit reached", type: "requests", code: "rate_limit_exceeded" } }, {
        "retry-after": "1"
      })
      const up = yield* upstream((n) => (n === 0 || n === 1 ? limited : sse(textStream(["ok"]))))
      const clientFor = yield* edgeFor(up.url)
      const error = apiError(yield* caught(() => clientFor({ maxRetries: 0 }).chat.completions.create({ model: "model", messages })))
      expect(error).toBeInstanceOf(OpenAI.RateLimitError)
      expect(error.code).toBe("rate_limit_exceeded")
      expect(error.headers?.get("retry-after")).toBe("1")
      expect(error.headers?.get("x-should-retry")).toBeNull()
      expect(up.requests()).toBe(1)

      const started = Date.now()
      const answer = yield* Effect.promise(() => clientFor().chat.completions.create({ model: "model", messages }))
      expect(answer.choices[0]?.message.content).toBe("ok")
      expect(up.requests()).toBe(3)
      // Waited for the Retry-After (1 s) rather than the SDK's own backoff (0.5 s and up).
      expect(Date.now() - started).toBeGreaterThanOrEqual(950)
    }))

  it.scopedLive("a strict tool_validation_error is not retried by the SDK: exactly toolValidationAttempts upstream requests", () =>
    Effect.gen(function* () {
      const invalid = sse([
        chunk({ role: "assistant", tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\": 1}" } }] }),
        chunk({ finish_reason: "tool_calls" })
      ])
      const up = yield* upstream(() => invalid)
      const client = (yield* edgeFor(up.url))()
      const tools = [{
        type: "function" as const,
        function: {
          name: "get_weather",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
        }
      }]
      const error = apiError(yield* caught(() => client.chat.completions.create({ model: "strict", messages, tools })))
      expect(error.status).toBe(502)
      expect(error.type).toBe("tool_validation_error")
      expect(error.headers?.get("x-should-retry")).toBe("false")
      expect(up.requests()).toBe(3)
    }))

  it.scopedLive("an upstream 401 echoing the edge's key: a 502 saying the credentials were refused, without the key, not retried", () =>
    Effect.gen(function* () {
      const up = yield* upstream(() =>
        json(401, { error: { message: `Incorrect API key provided: Bearer ${UPSTREAM_KEY}`, code: "invalid_api_key" } })
      )
      const client = (yield* edgeFor(up.url))()
      const error = apiError(yield* caught(() => client.chat.completions.create({ model: "model", messages })))
      expect(error.status).toBe(502)
      expect(error.message).toContain("the upstream refused the edge's credentials")
      expect(JSON.stringify(error.error)).not.toContain("SECRET")
      expect(up.requests()).toBe(1)
    }))

  it.scopedLive("an unreachable upstream: the client is told 'upstream unreachable', never its address", () =>
    Effect.gen(function* () {
      const up = yield* upstream(() => contextTooLong)
      yield* Effect.promise(() => new Promise<void>((resolve) => up.server.close(() => resolve())))
      const client = (yield* edgeFor(up.url))({ maxRetries: 0 })
      const error = apiError(yield* caught(() => client.chat.completions.create({ model: "model", messages })))
      expect(error.status).toBe(502)
      expect(error.message).toContain("upstream unreachable")
      expect(error.message).not.toContain("127.0.0.1")
    }))
})
