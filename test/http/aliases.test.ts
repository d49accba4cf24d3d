import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { layerHttp } from "../../src/Edge.js"
import { layerNodeServer } from "../../src/http/HttpLive.js"
import { serverPort } from "./rawClient.js"

const edgeWith = (json: unknown) => {
  const config = Either.getOrThrow(decodeConfigJson("test", json))
  return layerHttp.pipe(
    Layer.provideMerge(layerNodeServer),
    Layer.provide(EdgeConfig.layer(config)),
    Layer.provide(NodeHttpClient.dispatcherLayer)
  )
}

const config = {
  server: {
    port: 0,
    apiKeys: [{ key: "sk-all", name: "all" }, { key: "sk-by-alias", name: "by-alias", models: ["claude-sonnet-4-5"] }]
  },
  models: [{ id: "coder", aliases: ["claude-sonnet-4-5", "gpt-5.5"], provider: { type: "echo", tokenDelayMs: 0 } }]
}

const post = (port: number, key: string, model: string) =>
  Effect.promise(() =>
    fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model, messages: [{ role: "user", content: "hi there" }] })
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> }))
  )

describe("models[].aliases", () => {
  it.scopedLive("an alias runs its model and the answer carries the name the caller sent; /v1/models lists ids and aliases", () =>
    Effect.gen(function* () {
      const port = yield* serverPort
      const byAlias = yield* post(port, "sk-all", "gpt-5.5")
      expect(byAlias.status).toBe(200)
      expect(byAlias.body["model"]).toBe("gpt-5.5")
      const byId = yield* post(port, "sk-all", "coder")
      expect(byId.body["model"]).toBe("coder")
      const models = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: "Bearer sk-all" } }).then((r) => r.json())
      )
      expect((models as { data: Array<{ id: string }> }).data.map((m) => m.id)).toEqual(["coder", "claude-sonnet-4-5", "gpt-5.5"])
      // An unknown name is still a 404 naming it.
      const unknown = yield* post(port, "sk-all", "gpt-4")
      expect(unknown.status).toBe(404)
    }).pipe(Effect.provide(edgeWith(config))))

  it.scopedLive("GET /v1/models/{id}: one model by id or alias, in the caller's API's shape; a name it may not use is the API's 404", () =>
    Effect.gen(function* () {
      const port = yield* serverPort
      const get = (path: string, key: string, headers: Record<string, string> = {}) =>
        Effect.promise(() =>
          fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: `Bearer ${key}`, ...headers } }).then(
            async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> })
          ))
      expect(yield* get("/v1/models/gpt-5.5", "sk-all")).toEqual({
        status: 200,
        body: { id: "gpt-5.5", object: "model", created: 0, owned_by: "iop" }
      })
      const anthropic = yield* get("/v1/models/coder", "sk-all", { "anthropic-version": "2023-06-01" })
      expect(anthropic).toMatchObject({ status: 200, body: { type: "model", id: "coder", display_name: "coder" } })
      const missing = yield* get("/v1/models/gpt-4", "sk-all")
      expect(missing).toMatchObject({ status: 404, body: { error: { code: "model_not_found" } } })
      const missingAnthropic = yield* get("/v1/models/gpt-4", "sk-all", { "anthropic-version": "2023-06-01" })
      expect(missingAnthropic).toMatchObject({ status: 404, body: { type: "error", error: { type: "not_found_error" } } })
      // A key limited to an alias sees that name only.
      expect((yield* get("/v1/models/claude-sonnet-4-5", "sk-by-alias")).status).toBe(200)
      expect((yield* get("/v1/models/gpt-5.5", "sk-by-alias")).status).toBe(404)
      // An id with a slash (`org/model`) and an escaped one are one id.
      expect((yield* get("/v1/models/org%2Fnone", "sk-all")).status).toBe(404)
    }).pipe(Effect.provide(edgeWith(config))))

  it.scopedLive("a key limited to an alias may use the model by that alias only", () =>
    Effect.gen(function* () {
      const port = yield* serverPort
      expect((yield* post(port, "sk-by-alias", "claude-sonnet-4-5")).status).toBe(200)
      expect((yield* post(port, "sk-by-alias", "gpt-5.5")).status).toBe(404)
    }).pipe(Effect.provide(edgeWith(config))))

  it("a name used twice (an alias of two models, or an alias equal to an id) is a config error naming it", () => {
    const twice = decodeConfigJson("edge.json", {
      models: [
        { id: "a", provider: { type: "echo" } },
        { id: "b", aliases: ["a"], provider: { type: "echo" } }
      ]
    })
    expect(Either.isLeft(twice) && twice.left.message).toMatch(/models\[1\]\.aliases\[0\]: duplicate model name "a"/)
  })
})
