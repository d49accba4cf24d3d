import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import { parseKeyFile, parseKeyList } from "../../src/config/apiKeys.js"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { layerHttp } from "../../src/Edge.js"
import { makeKeyCheck, presentedKey } from "../../src/http/Auth.js"

const config = Either.getOrThrow(
  decodeConfigJson("test", {
    server: {
      apiKeys: [
        "sk-open",
        { key: "sk-small", name: "small", models: ["slow"], maxConcurrentRuns: 1 }
      ]
    },
    runs: { maxConcurrentRuns: 3 },
    models: [
      { id: "slow", provider: { type: "echo", tokenDelayMs: 30 } },
      { id: "fast", provider: { type: "echo", tokenDelayMs: 0 } }
    ]
  })
)

const EdgeUnderTest = layerHttp.pipe(
  Layer.provide(EdgeConfig.layer(config)),
  Layer.provide(NodeHttpClient.dispatcherLayer),
  Layer.provideMerge(NodeHttpServer.layerTest)
)

const chat = (key: string, model: string, text = "hi") =>
  HttpClientRequest.post("/v1/chat/completions").pipe(
    HttpClientRequest.bearerToken(key),
    HttpClientRequest.bodyUnsafeJson({ model, stream: true, messages: [{ role: "user", content: text }] })
  )

describe("API keys and limits", () => {
  it("keys: constant-time match returns the key's policy; wrong or missing keys are denied", () => {
    const check = makeKeyCheck(config.server.apiKeys)
    expect(check("Bearer sk-open")).toEqual({ _tag: "Granted", key: { id: "key-1", models: undefined, maxConcurrentRuns: undefined } })
    expect(check("Bearer sk-small")).toMatchObject({ _tag: "Granted", key: { id: "small", models: ["slow"] } })
    expect(check("Bearer sk-nope")._tag).toBe("Denied")
    expect(check("sk-open")._tag).toBe("Denied")
    expect(check(undefined)._tag).toBe("Denied")
    expect(makeKeyCheck([])(undefined)._tag).toBe("Open")
    expect(makeKeyCheck([Redacted.make("a")])("bearer a")._tag).toBe("Granted")
  })

  it("x-api-key (Anthropic's header) is presented like a bearer key on every route; Authorization wins when both are sent", () => {
    const check = makeKeyCheck(config.server.apiKeys)
    expect(check(presentedKey({ "x-api-key": "sk-small" }))).toMatchObject({ _tag: "Granted", key: { id: "small" } })
    expect(check(presentedKey({ "x-api-key": "sk-nope" }))).toEqual({ _tag: "Denied", reason: "incorrect" })
    expect(check(presentedKey({ "x-api-key": "  " }))).toEqual({ _tag: "Denied", reason: "missing" })
    expect(check(presentedKey({}))).toEqual({ _tag: "Denied", reason: "missing" })
    expect(check(presentedKey({ authorization: "Bearer sk-nope", "x-api-key": "sk-small" }))._tag).toBe("Denied")
  })

  it("a denial says whether the key was missing (no bearer key at all) or incorrect (a key that matches none)", () => {
    const check = makeKeyCheck(config.server.apiKeys)
    for (const authorization of [undefined, "", "   ", "Bearer", "Bearer ", "Basic sk-open", "sk-open"]) {
      expect(check(authorization), String(authorization)).toEqual({ _tag: "Denied", reason: "missing" })
    }
    for (const authorization of ["Bearer sk-nope", "Bearer sk-ope", "bearer sk-open2", "Bearer  sk-small x"]) {
      expect(check(authorization), authorization).toEqual({ _tag: "Denied", reason: "incorrect" })
    }
  })

  it("key files and lists", () => {
    expect(parseKeyFile("# keys\nsk-1\n\n  sk-2  \n")).toEqual(["sk-1", "sk-2"])
    expect(parseKeyList("sk-1, sk-2,,")).toEqual(["sk-1", "sk-2"])
  })

  it.scopedLive("a key limited to some models sees only those, and others are model_not_found", () =>
    Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const models = yield* client.execute(HttpClientRequest.get("/v1/models").pipe(HttpClientRequest.bearerToken("sk-small")))
      expect(((yield* models.json) as { data: Array<{ id: string }> }).data.map((m) => m.id)).toEqual(["slow"])
      const denied = yield* client.execute(chat("sk-small", "fast"))
      expect(denied.status).toBe(404)
      expect(((yield* denied.json) as { error: { code: string } }).error.code).toBe("model_not_found")
      const open = yield* client.execute(HttpClientRequest.get("/v1/models").pipe(HttpClientRequest.bearerToken("sk-open")))
      expect(((yield* open.json) as { data: Array<{ id: string }> }).data).toHaveLength(2)
    }).pipe(Effect.provide(EdgeUnderTest))
  )

  it.scopedLive("per-key and edge-wide concurrency limits answer 429 rate_limit_error with Retry-After", () =>
    Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const long = "one two three four five six seven eight nine ten"
      const first = yield* client.execute(chat("sk-small", "slow", long))
      expect(first.status).toBe(200)
      const reading = yield* Effect.fork(Stream.runDrain(first.stream))
      const second = yield* client.execute(chat("sk-small", "slow"))
      expect(second.status).toBe(429)
      expect(second.headers["retry-after"]).toBe("1")
      expect(((yield* second.json) as { error: { type: string } }).error.type).toBe("rate_limit_error")
      // The edge-wide limit (3): the small key's stream plus two more fill it.
      const more = yield* Effect.forEach([1, 2], () => client.execute(chat("sk-open", "slow", long)))
      expect(more.map((r) => r.status)).toEqual([200, 200])
      const readingMore = yield* Effect.forEach(more, (r) => Effect.fork(Stream.runDrain(r.stream)))
      const over = yield* client.execute(chat("sk-open", "slow"))
      expect(over.status).toBe(429)
      yield* Fiber.join(reading)
      yield* Effect.forEach(readingMore, Fiber.join)
      const after = yield* client.execute(chat("sk-small", "slow"))
      expect(after.status).toBe(200)
      yield* Stream.runDrain(after.stream)
    }).pipe(Effect.provide(EdgeUnderTest))
  , 20_000)
})
