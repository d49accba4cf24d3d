import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { layerHttp, layerServices } from "../../src/Edge.js"

/** Key sources are resolved by the library layers themselves, not only by the CLI: an edge built from them is never open by accident. */

const dir = mkdtempSync(join(tmpdir(), "iop-keys-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const file = (name: string, text: string): string => {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}

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

const failureTag = <A>(exit: Exit.Exit<A, { readonly _tag: string }>): string | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Option.map(Cause.failureOption(exit.cause), (e) => e._tag)) : undefined

const chat = HttpClientRequest.post("/v1/chat/completions").pipe(
  HttpClientRequest.bodyUnsafeJson({ model: "echo", messages: [{ role: "user", content: "hi" }] })
)

describe("API key sources in the library layers", () => {
  it.scopedLive("layerHttp enforces the keys of server.apiKeysFile: 401 without a key, 200 with one", () =>
    Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const missing = yield* client.execute(chat)
      expect(missing.status).toBe(401)
      expect(((yield* missing.json) as { error: { type: string; code: string } }).error).toMatchObject({
        type: "authentication_error",
        code: "invalid_api_key"
      })
      const models = yield* client.execute(HttpClientRequest.get("/v1/models"))
      expect(models.status).toBe(401)
      const granted = yield* client.execute(chat.pipe(HttpClientRequest.bearerToken("sk-from-file")))
      expect(granted.status).toBe(200)
      expect((yield* client.execute(HttpClientRequest.get("/healthz"))).status).toBe(200)
    }).pipe(Effect.provide(edgeWith({ apiKeysFile: file("keys", "# keys\nsk-from-file\n") })))
  )

  it.scopedLive("layerHttp with a key file that holds no key fails to build with ApiKeySourceError (it never serves open)", () =>
    Effect.gen(function* () {
      const exit = yield* Layer.build(edgeWith({ apiKeysFile: file("empty", "# nothing yet\n\n") })).pipe(Effect.exit)
      expect(failureTag(exit)).toBe("ApiKeySourceError")
    })
  )

  it.scopedLive("layerServices (no server) refuses a key file that holds no key too", () =>
    Effect.gen(function* () {
      const config = Either.getOrThrow(decodeConfigJson("test", { server: { apiKeysFile: file("blank", "\n  \n") } }))
      const layer = layerServices.pipe(Layer.provide(EdgeConfig.layer(config)), Layer.provide(NodeHttpClient.dispatcherLayer))
      const exit = yield* Layer.build(layer).pipe(Effect.exit)
      expect(failureTag(exit)).toBe("ApiKeySourceError")
    })
  )
})
