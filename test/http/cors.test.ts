import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { layerHttp } from "../../src/Edge.js"

const edgeWith = (server: Record<string, unknown>) =>
  layerHttp.pipe(
    Layer.provide(
      EdgeConfig.layer(
        Either.getOrThrow(decodeConfigJson("test", { server, models: [{ id: "echo", provider: { type: "echo", tokenDelayMs: 0 } }] }))
      )
    ),
    Layer.provide(NodeHttpClient.dispatcherLayer),
    Layer.provideMerge(NodeHttpServer.layerTest)
  )

const chat = (headers: Record<string, string>) =>
  HttpClientRequest.post("/v1/chat/completions").pipe(
    HttpClientRequest.setHeaders(headers),
    HttpClientRequest.bodyUnsafeJson({ model: "echo", messages: [{ role: "user", content: "hi" }] })
  )

const errorOf = (json: unknown) => (json as { error: { type: string; code: string; message: string } }).error

describe("browsers: Origin and Host", () => {
  it.scopedLive("by default a cross-origin POST is refused 403 origin_not_allowed; without Origin it is served", () =>
    Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const refused = yield* client.execute(chat({ origin: "https://evil.example" }))
      expect(refused.status).toBe(403)
      expect(refused.headers["access-control-allow-origin"]).toBeUndefined()
      const error = errorOf(yield* refused.json)
      expect(error).toMatchObject({ type: "invalid_request_error", code: "origin_not_allowed" })
      expect(error.message).toContain("https://evil.example")
      const plain = yield* client.execute(chat({}))
      expect(plain.status).toBe(200)
      expect(plain.headers["access-control-allow-origin"]).toBeUndefined()
      const health = yield* client.execute(HttpClientRequest.get("/healthz").pipe(HttpClientRequest.setHeader("origin", "https://evil.example")))
      expect(health.status).toBe(200)
    }).pipe(Effect.provide(edgeWith({})))
  )

  it.scopedLive("an allowed origin gets CORS headers on responses, and its preflight a 204 (no key needed)", () =>
    Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const origin = "https://app.example"
      const preflight = yield* client.execute(
        HttpClientRequest.make("OPTIONS")("/v1/chat/completions").pipe(
          HttpClientRequest.setHeaders({
            origin,
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization,content-type,x-stainless-lang"
          })
        )
      )
      expect(preflight.status).toBe(204)
      expect(preflight.headers).toMatchObject({
        "access-control-allow-origin": origin,
        "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
        "access-control-allow-headers": "authorization,content-type,x-stainless-lang",
        "access-control-max-age": "600"
      })
      expect(preflight.headers["vary"]).toContain("Origin")
      const denied = yield* client.execute(chat({ origin }))
      expect(denied.status).toBe(401)
      expect(denied.headers["access-control-allow-origin"]).toBe(origin)
      const served = yield* client.execute(chat({ origin, authorization: "Bearer sk-1" }))
      expect(served.status).toBe(200)
      expect(served.headers).toMatchObject({ "access-control-allow-origin": origin, vary: "Origin" })
      expect(served.headers["access-control-expose-headers"]).toContain("x-request-id")
      expect(served.headers["x-request-id"]).toBeDefined()
      const other = yield* client.execute(chat({ origin: "https://other.example", authorization: "Bearer sk-1" }))
      expect(other.status).toBe(403)
    }).pipe(Effect.provide(edgeWith({ apiKeys: ["sk-1"], cors: { allowedOrigins: ["https://app.example"] } })))
  )

  it.scopedLive("on a loopback bind, a foreign Host (DNS rebinding) is refused 403 host_not_allowed, probes included", () =>
    Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const rebound = yield* client.execute(chat({ host: "evil.example:8080" }))
      expect(rebound.status).toBe(403)
      expect(errorOf(yield* rebound.json)).toMatchObject({ type: "invalid_request_error", code: "host_not_allowed" })
      for (const path of ["/healthz", "/metrics", "/v1/models"]) {
        const r = yield* client.execute(HttpClientRequest.get(path).pipe(HttpClientRequest.setHeader("host", "evil.example")))
        expect(r.status, path).toBe(403)
      }
      for (const host of ["localhost:8080", "127.0.0.1", "[::1]:1234", "edge.lan:8080"]) {
        const r = yield* client.execute(chat({ host }))
        expect(r.status, host).toBe(200)
      }
    }).pipe(Effect.provide(edgeWith({ host: "127.0.0.1", allowedHosts: ["edge.lan"] })))
  )

  it.scopedLive("a server bound to all interfaces takes any Host", () =>
    Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const r = yield* client.execute(chat({ host: "edge.example.com" }))
      expect(r.status).toBe(200)
    }).pipe(Effect.provide(edgeWith({ host: "0.0.0.0" })))
  )
})
