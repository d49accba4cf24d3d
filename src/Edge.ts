/**
 * The edge's layers (public): its services for a config, the routes to mount (their middleware on them), the serving layers,
 * the whole `iop edge` process. Layer names follow one rule: `layer` is what most users want, `layerX` its
 * variants. The edge's own services (the door, the response path, limits, the lifecycle) travel opaque inside
 * `EdgeInternals`; what a user may call is `ChatCompletions`, `RunService`, `NodeRegistry` and `Metrics`.
 */
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import type * as HttpRouter from "@effect/platform/HttpRouter"
import type * as HttpServer from "@effect/platform/HttpServer"
import type * as HttpServerError from "@effect/platform/HttpServerError"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type * as Config from "effect/Config"
import type * as ConfigErrorM from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Compose from "./compose.js"
import type { ApiKeySourceError } from "./config/apiKeys.js"
import * as EdgeConfig from "./config/EdgeConfig.js"
import { decodeConfigJson, type InvalidConfig } from "./config/loadConfig.js"
import * as HttpLive from "./http/HttpLive.js"
import { layer as embeddedNodeLayer } from "./run/EmbeddedNode.js"
import * as Metrics from "./observability/Metrics.js"
import * as Telemetry from "./observability/Telemetry.js"
import type { ChatCompletions } from "./dialects/chat-completions/ChatCompletions.js"
import type { NodeRegistry } from "./run/NodeRegistry.js"
import type { RunService } from "./run/RunService.js"
import type { ResponseStore } from "./store/ResponseStore.js"

export { EdgeInternals, Internals } from "./compose.js"

/** What the edge's layers provide: the services a user may call, and the edge's own (opaque). */
export type EdgeServices = ChatCompletions | RunService | NodeRegistry | Metrics.Metrics | Compose.EdgeInternals

/** What the routes read. */
export type RouteServices = EdgeConfig.EdgeConfig | Metrics.Metrics | NodeRegistry | Compose.EdgeInternals

/** Metrics with the process's own (CPU, memory, event loop) beside the edge's. */
export const layerMetrics: Layer.Layer<Metrics.Metrics> = Metrics.layer

/** Metrics without process metrics, for tests. */
export const layerMetricsTest: Layer.Layer<Metrics.Metrics> = Metrics.layerTest

/**
 * The node inside the edge process: the config's `models` with their built-in providers, over an undici pool
 * of its own.
 */
export const layerEmbeddedNode: Layer.Layer<never, never, EdgeConfig.EdgeConfig | NodeRegistry> = embeddedNodeLayer.pipe(
  Layer.provide(NodeHttpClient.dispatcherLayer)
)

/**
 * The Responses API's response store the config's `responses.store` selects: in memory (the default) or none. The
 * NATS one is `iop-edge/nats`'s `layerResponseStore` (this entry never loads the NATS client); selected here, it
 * is a defect saying so.
 */
export const layerResponseStore: Layer.Layer<ResponseStore, never, EdgeConfig.EdgeConfig> = Compose.responseStoreLayer

/**
 * The edge's services from pieces you choose: `metrics` (`layerMetrics`, or `layerMetricsTest` without process
 * metrics), `nodes` (what serves the models: `layerEmbeddedNode` for the config's models, `LocalNode.layerModel`
 * layers, the NATS transport of `iop-edge/nats`, merged) and `responseStore` (where the Responses API keeps
 * responses: default `layerResponseStore`; `iop-edge/nats`'s for a store shared by edges; or your own
 * `ResponseStore`). It provides the config it was given with the key sources resolved: serve the routes with that
 * one.
 */
export const layerFrom = <E, E2 = never>(parts: {
  readonly metrics: Layer.Layer<Metrics.Metrics>
  readonly nodes: Layer.Layer<never, E, NodeRegistry | EdgeConfig.EdgeConfig>
  readonly responseStore?: Layer.Layer<ResponseStore, E2, EdgeConfig.EdgeConfig>
}): Layer.Layer<EdgeServices | EdgeConfig.EdgeConfig, E | E2 | ApiKeySourceError, EdgeConfig.EdgeConfig> =>
  Compose.compose({ metrics: parts.metrics, nodes: parts.nodes, responseStore: parts.responseStore ?? layerResponseStore })

/**
 * The edge's services for the `EdgeConfig` it is given, its models served by the embedded node. Mount `routes`
 * (or serve with `layerServe`), or call `ChatCompletions` / `RunService` directly. Remote nodes: `iop-edge/nats`.
 */
export const layerServices: Layer.Layer<EdgeServices | EdgeConfig.EdgeConfig, ApiKeySourceError, EdgeConfig.EdgeConfig> =
  layerFrom({ metrics: layerMetrics, nodes: layerEmbeddedNode })

/** The config as the file's JSON would say it, in code: every field optional, defaults as in docs/configuration.md. */
export type EdgeConfigInput = typeof EdgeConfig.EdgeConfigSchema.Encoded

/** A config from its input, decoded as the config file is (errors name the field). */
export const decodeConfig = (input: EdgeConfigInput): Effect.Effect<EdgeConfig.EdgeConfigShape, InvalidConfig> =>
  decodeConfigJson("config", input)

/** The `EdgeConfig` service for a config written in code (decoded as the file is). */
export const layerEdgeConfig = (input: EdgeConfigInput): Layer.Layer<EdgeConfig.EdgeConfig, InvalidConfig> =>
  Layer.effect(EdgeConfig.EdgeConfig, decodeConfig(input))

/**
 * `layerServices` and its `EdgeConfig` for a config written in code:
 * `Edge.layer({ models: [], runs: { idleTimeoutMs: 30_000 } })`.
 */
export const layer = (
  input: EdgeConfigInput
): Layer.Layer<EdgeServices | EdgeConfig.EdgeConfig, InvalidConfig | ApiKeySourceError> =>
  layerServices.pipe(Layer.provideMerge(layerEdgeConfig(input)))

/** `layer` with the config read from Effect's `Config` (environment by default), e.g. `Config.all({...})`. */
export const layerConfig = (
  config: Config.Config<EdgeConfigInput>
): Layer.Layer<EdgeServices | EdgeConfig.EdgeConfig, ConfigErrorM.ConfigError | InvalidConfig | ApiKeySourceError> =>
  layerServices.pipe(Layer.provideMerge(Layer.effect(EdgeConfig.EdgeConfig, Effect.flatMap(config, decodeConfig))))

/**
 * The edge's HTTP API as a router to mount beside your own routes (`HttpRouter.concat`, `HttpRouter.mount`):
 * `/v1/chat/completions`, `/v1/responses` (+ `GET|DELETE /{id}`, `GET /{id}/input_items`), `/v1/messages`
 * (+ `count_tokens`), `/v1/models` (+ `/{id}`), `GET|HEAD /`,
 * `/healthz`, `/metrics`, and `OPTIONS` of each (CORS preflights). No catch-all, no server of its own. The edge's
 * middleware — request id (`x-request-id`), drain tracking, the Host/Origin checks and CORS, one access-log line
 * per request at the config's `log.level`, and on a Node server the handling of an unread request body — is on
 * each of these routes and on nothing else: mounting them never changes how the app's own routes answer.
 */
export const routes: Effect.Effect<HttpRouter.HttpRouter, never, RouteServices> = Compose.withInternals(HttpLive.routes)

/** The edge server's app: its routes, a JSON 404 in the caller's API's shape for anything else, the edge's middleware over both. */
export const httpApp = Compose.withInternals(HttpLive.httpApp)

/** The routes served on a given HttpServer, with graceful shutdown, over the services you give. */
export const layerServe: Layer.Layer<never, never, HttpServer.HttpServer | EdgeServices | EdgeConfig.EdgeConfig> =
  // The app is installed first and removed last, so draining still answers new requests with 503.
  Compose.layerWithInternals(HttpLive.layerGracefulShutdown.pipe(Layer.provide(HttpLive.layerApp)))

/** `layerServices` served on a given HttpServer, with graceful shutdown. */
export const layerHttp: Layer.Layer<never, ApiKeySourceError, EdgeConfig.EdgeConfig | HttpServer.HttpServer> =
  layerServe.pipe(Layer.provide(layerServices))

/**
 * The whole edge process for a config: server on its host and port, embedded node (and the `nodes` you add,
 * e.g. the NATS transport), the response store (default `layerResponseStore`). The key sources are resolved
 * before the server binds its port.
 */
export const layerServer = <E = never, E2 = never>(
  config: EdgeConfig.EdgeConfigShape,
  nodes: Layer.Layer<never, E, NodeRegistry | EdgeConfig.EdgeConfig> = Layer.empty,
  responseStore?: Layer.Layer<ResponseStore, E2, EdgeConfig.EdgeConfig>
): Layer.Layer<never, HttpServerError.ServeError | ApiKeySourceError | E | E2> =>
  layerServe.pipe(
    Layer.provide(layerFrom({
      metrics: layerMetrics,
      nodes: Layer.merge(layerEmbeddedNode, nodes),
      responseStore: responseStore ?? layerResponseStore
    })),
    // The edge's middleware makes each request's span: the platform's own would be a second one.
    HttpMiddleware.withTracerDisabledWhen(() => true),
    Telemetry.provide(config.telemetry, "iop-edge"),
    Layer.provide(HttpLive.layerNodeServer),
    Layer.provide(EdgeConfig.layer(config))
  )

