import Anthropic from "@anthropic-ai/sdk"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as EdgeConfig from "../../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../../src/config/loadConfig.js"
import { layerHttp } from "../../../src/Edge.js"
import { type FakeUpstream, type Handler, type Script, startFakeUpstream } from "../../support/fakeUpstream.js"

/**
 * An in-process edge (ephemeral port) whose models point at a scripted fake OpenAI upstream, for the Messages
 * API's client tests: `model` (plain, alias `claude-sonnet-4-5`), `strict` (strict tool validation) and `strict-buffered` (a strict
 * stream validated, and maybe replayed, before its first byte).
 */

export interface MessagesEdge {
  readonly up: FakeUpstream
  /** The edge's base URL, without `/v1`. */
  readonly url: string
  readonly client: (options?: { readonly apiKey?: string | null; readonly maxRetries?: number }) => Anthropic
}

export interface EdgeOptions {
  readonly apiKeys?: ReadonlyArray<string>
  readonly toolValidationAttempts?: number
  /** The aliases of `model` (default: `claude-sonnet-4-5`). */
  readonly aliases?: ReadonlyArray<string>
  /** Where the edge's log entries (debug and up) go; without it, nothing is logged. */
  readonly logs?: Array<{ readonly message: string; readonly annotations: Readonly<Record<string, unknown>> }>
}

const logging = (logs: EdgeOptions["logs"]) =>
  logs === undefined
    ? Logger.minimumLogLevel(LogLevel.None)
    : Layer.merge(
      Logger.minimumLogLevel(LogLevel.Debug),
      Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ message, annotations }) => {
          const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
          logs.push({ message: text, annotations: Object.fromEntries(HashMap.toEntries(annotations)) })
        })
      )
    )

export const messagesEdge = (handler: Handler | Script, options: EdgeOptions = {}) =>
  Effect.gen(function* () {
    const up = yield* Effect.acquireRelease(Effect.promise(() => startFakeUpstream(handler)), (u) => Effect.promise(u.close))
    const provider = { type: "openai", baseUrl: up.url, apiKey: "sk-upstream" }
    const config = Either.getOrThrow(
      decodeConfigJson("test", {
        server: { apiKeys: options.apiKeys ?? [] },
        runs: { toolValidationAttempts: options.toolValidationAttempts ?? 2 },
        // The edge logs at the config's level (honoured by the library layers); the test captures debug lines.
        log: { level: "debug" },
        models: [
          { id: "model", aliases: options.aliases ?? ["claude-sonnet-4-5"], provider },
          { id: "strict", provider, output: { strict: true } },
          { id: "strict-buffered", provider, output: { strict: true, streamBuffer: true } }
        ]
      })
    )
    const layer = layerHttp.pipe(
      Layer.provide(EdgeConfig.layer(config)),
      Layer.provide(NodeHttpClient.dispatcherLayer),
      Layer.provideMerge(NodeHttpServer.layerTest),
      Layer.provide(logging(options.logs))
    )
    const context = yield* Layer.build(layer)
    const address = (yield* Effect.provide(HttpServer.HttpServer, context)).address
    const url = `http://127.0.0.1:${address._tag === "TcpAddress" ? address.port : 0}`
    const edge: MessagesEdge = {
      up,
      url,
      client: (o = {}) =>
        new Anthropic({
          baseURL: url,
          apiKey: o.apiKey === undefined ? "client-key" : o.apiKey,
          maxRetries: o.maxRetries ?? 0
        })
    }
    return edge
  })

/** A promise's outcome as an Either (SDK errors are thrown). */
export const caught = <A>(promise: () => Promise<A>) =>
  Effect.promise(() => promise().then((value) => Either.right(value), (error: unknown) => Either.left(error)))

/** The body the fake upstream got in its n-th request, as an object. */
export const upstreamBody = (up: FakeUpstream, n = 0): Record<string, unknown> => {
  const body = up.requests[n]?.body
  return typeof body === "object" && body !== null && !Array.isArray(body) ? { ...body } : {}
}
