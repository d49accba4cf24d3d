/**
 * An in-process edge on an ephemeral loopback port whose models are models of the real llama-server (`tiny`): the
 * text tool-call families (each with `extraBody.grammar` forcing that family's markup for the known call), or
 * strict models constrained by the edge.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Scope from "effect/Scope"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { layerHttp } from "../../src/Edge.js"

export interface ModelEntry {
  readonly id: string
  /** The request-level GBNF sent upstream with every request of this model (none: the edge compiles its own). */
  readonly grammar?: string
  readonly toolFormats?: ReadonlyArray<string>
  /** What the upstream can constrain (absent: the default, `auto`, found out on the first request that needs it). */
  readonly constraints?: "auto" | "llama.cpp" | "vllm" | "ollama" | "none"
  readonly strict?: boolean
  /**
   * How tools reach the upstream: `text` unless said (the edge's Hermes prompt); `native` (the server's own
   * template) is written as no `tools` key at all, the default, as a plain config has it.
   */
  readonly tools?: "text" | "native"
}

export interface RealEdge {
  /** `http://127.0.0.1:PORT`, without `/v1`. */
  readonly url: string
  readonly close: () => Promise<void>
}

/** An edge for `json` (a config file's content; `source` names it in errors), served in this process on an ephemeral loopback port. */
export const serveConfig = async (source: string, json: unknown): Promise<RealEdge> => {
  const config = Either.getOrThrow(decodeConfigJson(source, json))
  const layer = layerHttp.pipe(
    Layer.provide(EdgeConfig.layer(config)),
    Layer.provide(NodeHttpClient.dispatcherLayer),
    Layer.provideMerge(NodeHttpServer.layerTest),
    Layer.provide(Logger.minimumLogLevel(LogLevel.None))
  )
  const scope = Effect.runSync(Scope.make())
  const address = await Effect.runPromise(
    Effect.flatMap(Layer.buildWithScope(layer, scope), (context) =>
      Effect.map(Effect.provide(HttpServer.HttpServer, context), (server) => server.address))
  )
  if (address._tag !== "TcpAddress") throw new Error("the edge is not on TCP")
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

export const startEdge = (upstream: string, models: ReadonlyArray<ModelEntry>): Promise<RealEdge> =>
  serveConfig("realup", {
    server: { apiKeys: [] },
    log: { level: "error" },
    models: models.map((m) => ({
      id: m.id,
      ...(m.tools === "native" ? {} : { tools: "text" }),
      ...(m.toolFormats !== undefined ? { toolFormats: m.toolFormats } : {}),
      ...(m.strict === true ? { output: { strict: true } } : {}),
      provider: {
        type: "openai",
        baseUrl: upstream,
        model: "tiny",
        ...(m.grammar !== undefined ? { extraBody: { grammar: m.grammar } } : {}),
        ...(m.constraints !== undefined ? { constraints: m.constraints } : {})
      }
    }))
  })
