import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import OpenAI from "openai"
import * as EdgeConfig from "../../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../../src/config/loadConfig.js"
import * as Edge from "../../../src/Edge.js"
import type { ResponseStore } from "../../../src/store/ResponseStore.js"
import { chunk, type FakeUpstream, type Handler, type Script, startFakeUpstream } from "../../support/fakeUpstream.js"

/**
 * An edge in this process (ephemeral port) whose models point at a fake OpenAI-compatible upstream, for the
 * Responses API's client tests. Models: `model` (aliases `gpt-5.5`), `strict` (strict output, 2 attempts),
 * `text-tools` (tools described in the prompt, calls parsed from the text).
 */

export interface LogLine {
  readonly message: string
  readonly level: string
  readonly annotations: Readonly<Record<string, unknown>>
}

export interface TestEdge {
  readonly url: string
  readonly upstream: FakeUpstream
  readonly client: (options?: { readonly maxRetries?: number }) => OpenAI
  /** Debug and above, as the edge logged them. */
  readonly logs: Array<LogLine>
  /** The chat request bodies the upstream received, in order. */
  readonly upstreamBodies: () => ReadonlyArray<Record<string, unknown>>
}

const record = (u: unknown): Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u) ? Object.fromEntries(Object.entries(u)) : {}

export interface TestEdgeOptions {
  /** Config fields beside the models (`responses`, `server.apiKeys`, ...). */
  readonly config?: Record<string, unknown>
  /** The response store (default: the config's, `Edge.layerResponseStore`). */
  readonly responseStore?: Layer.Layer<ResponseStore, never, EdgeConfig.EdgeConfig>
}

export const testEdge = (handler: Handler | Script, options: TestEdgeOptions = {}) =>
  Effect.gen(function* () {
    const upstream = yield* Effect.acquireRelease(
      Effect.promise(() => startFakeUpstream(handler)),
      (u) => Effect.promise(() => u.close())
    )
    const provider = { type: "openai", baseUrl: upstream.url, apiKey: "sk-upstream" }
    const config = Either.getOrThrow(
      decodeConfigJson("test", {
        runs: { toolValidationAttempts: 2 },
        // The edge logs at the config's level (honoured by the library layers); the test captures debug lines.
        log: { level: "debug" },
        models: [
          { id: "model", aliases: ["gpt-5.5"], provider },
          { id: "strict", provider, output: { strict: true } },
          { id: "text-tools", provider, tools: "text" }
        ],
        ...options.config
      })
    )
    const logs: Array<LogLine> = []
    const capture = Logger.make(({ message, logLevel, annotations }) => {
      logs.push({
        message: Array.isArray(message) ? String(message[0]) : String(message),
        level: logLevel.label,
        annotations: Object.fromEntries(HashMap.toEntries(annotations))
      })
    })
    const services = Edge.layerFrom({
      metrics: Edge.layerMetricsTest,
      nodes: Edge.layerEmbeddedNode,
      responseStore: options.responseStore ?? Edge.layerResponseStore
    })
    const layer = Edge.layerServe.pipe(
      Layer.provide(services),
      Layer.provide(EdgeConfig.layer(config)),
      Layer.provide(NodeHttpClient.dispatcherLayer),
      Layer.provideMerge(NodeHttpServer.layerTest),
      Layer.provide(Layer.merge(Logger.replace(Logger.defaultLogger, capture), Logger.minimumLogLevel(LogLevel.Debug)))
    )
    const context = yield* Layer.build(layer)
    const address = (yield* Effect.provide(HttpServer.HttpServer, context)).address
    const port = address._tag === "TcpAddress" ? address.port : 0
    const url = `http://127.0.0.1:${port}`
    return {
      url,
      upstream,
      client: (options = {}) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "client-key", maxRetries: 0, ...options }),
      logs,
      upstreamBodies: () => upstream.requests.map((r) => record(r.body))
    } satisfies TestEdge
  })

/** A fake upstream that streams `events` as SSE. */
export const sse = (events: ReadonlyArray<object>): Script => ({ kind: "sse", events })

/** The Responses API's `get_weather` function tool, as the SDK tests send it. */
export const weather = {
  type: "function" as const,
  name: "get_weather",
  description: "Weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
  strict: false
}

/** The upstream's streamed call of `get_weather` with `args`, whole in one chunk. */
export const toolCallChunk = (args: string, id = "call_up_1") =>
  chunk({ role: "assistant", tool_calls: [{ index: 0, id, type: "function", function: { name: "get_weather", arguments: args } }] })
