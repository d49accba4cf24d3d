import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import type * as HttpServer from "@effect/platform/HttpServer"
import type * as HttpServerError from "@effect/platform/HttpServerError"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Config from "effect/Config"
import type * as ConfigErrorM from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as ChatRun from "./chat/ChatRun.js"
import { type ApiKeySourceError, ApiKeysLive } from "./config/apiKeys.js"
import * as EdgeConfig from "./config/EdgeConfig.js"
import { type ConfigError, decodeConfigJson } from "./config/loadConfig.js"
import { ChatCompletions, ChatCompletionsLive } from "./dialects/chat-completions/ChatCompletions.js"
import { Gateway, GatewayLive } from "./chat/Gateway.js"
import { Responder, ResponderLive } from "./chat/Responder.js"
import { GracefulShutdownLive, HttpAppLive, NodeServerLive } from "./http/HttpLive.js"
import { Lifecycle, LifecycleLive } from "./http/Lifecycle.js"
import { Limits, LimitsLive } from "./chat/Limits.js"
import * as EmbeddedNode from "./run/EmbeddedNode.js"
import { Metrics, MetricsLive } from "./observability/Metrics.js"
import { NodeRegistry, NodeRegistryLive } from "./run/NodeRegistry.js"
import * as RunServiceM from "./run/RunService.js"
import { RunService } from "./run/RunService.js"

export { MetricsLive, MetricsTest } from "./observability/Metrics.js"
export { GracefulShutdownLive, httpApp, HttpAppLive, middleware, nodeServerLayer, routes } from "./http/HttpLive.js"
export type { EdgeMiddleware, RouteServices } from "./http/HttpLive.js"

/**
 * The node inside the edge process: the config's `models` with their built-in providers, over an undici pool
 * of its own (`EmbeddedNode.EmbeddedNodeLive` takes yours).
 */
export const EmbeddedNodeLive: Layer.Layer<never, never, EdgeConfig.EdgeConfig | NodeRegistry> =
  EmbeddedNode.EmbeddedNodeLive.pipe(Layer.provide(NodeHttpClient.dispatcherLayer))

/** The run service with the config's idle timeout. */
export const RunServiceLive: Layer.Layer<RunService, never, EdgeConfig.EdgeConfig | NodeRegistry> = Layer.unwrapEffect(
  EdgeConfig.EdgeConfig.pipe(Effect.map((c) => RunServiceM.layer({ idleTimeoutMs: c.runs.idleTimeoutMs })))
)

/** The run plane: the registry of nodes (the model catalogue) and the run service over it. */
export const RunPlaneLive: Layer.Layer<RunService | NodeRegistry, never, EdgeConfig.EdgeConfig> = RunServiceLive.pipe(
  Layer.provideMerge(NodeRegistryLive)
)

/** The chat plane with the config's retry and trace settings. */
export const ChatLive: Layer.Layer<ChatRun.Chat, never, EdgeConfig.EdgeConfig | RunService | Metrics> = Layer.unwrapEffect(
  EdgeConfig.EdgeConfig.pipe(
    Effect.map((c) =>
      ChatRun.layer({ toolValidationAttempts: c.runs.toolValidationAttempts, traceStreams: c.log.traceStreams })
    )
  )
)

/** What the edge's layers provide: its services, without a server. */
export type EdgeServices =
  | ChatCompletions
  | Gateway
  | Responder
  | ChatRun.Chat
  | RunService
  | NodeRegistry
  | Metrics
  | Lifecycle
  | Limits

/**
 * The config with `server.apiKeysFile` / `server.apiKeysEnv` read into `server.apiKeys`. Every layer below that
 * builds the edge goes through it, so a key source is enforced (or, yielding no key, stops the build) however
 * the edge is assembled; a config already resolved passes through unchanged.
 */
const ResolvedConfigLive: Layer.Layer<EdgeConfig.EdgeConfig, ApiKeySourceError, EdgeConfig.EdgeConfig> = ApiKeysLive.pipe(
  Layer.provide(NodeFileSystem.layer)
)

/**
 * The edge's services from pieces you choose: `metrics` (`MetricsLive`, or `MetricsTest` without process
 * metrics) and `nodes` (what serves the models: `EmbeddedNodeLive` for the config's models, `LocalNode.serve`
 * layers, the NATS transport of `iop-edge/nats`, merged). It provides the config it was given with the key
 * sources resolved: serve the routes with that one.
 */
export const compose = <E>(parts: {
  readonly metrics: Layer.Layer<Metrics>
  readonly nodes: Layer.Layer<never, E, NodeRegistry | EdgeConfig.EdgeConfig>
}): Layer.Layer<EdgeServices | EdgeConfig.EdgeConfig, E | ApiKeySourceError, EdgeConfig.EdgeConfig> =>
  Layer.mergeAll(ChatCompletionsLive, parts.nodes).pipe(
    Layer.provideMerge(GatewayLive),
    Layer.provideMerge(ResponderLive),
    Layer.provideMerge(ChatLive),
    Layer.provideMerge(RunPlaneLive),
    Layer.provideMerge(Layer.mergeAll(parts.metrics, LifecycleLive, LimitsLive)),
    Layer.provideMerge(ResolvedConfigLive)
  )

/**
 * The edge's services for the `EdgeConfig` it is given, its models served by the embedded node (built-in
 * providers over its own undici pool). Mount `routes` (or `HttpAppLive`) on your server, or call
 * `ChatCompletions` / `RunService` directly. Remote nodes over NATS: `iop-edge/nats`.
 */
export const EdgeLive: Layer.Layer<EdgeServices | EdgeConfig.EdgeConfig, ApiKeySourceError, EdgeConfig.EdgeConfig> = compose({
  metrics: MetricsLive,
  nodes: EmbeddedNodeLive
})

/** The config as the file's JSON would say it, in code: every field optional, defaults as in docs/configuration.md. */
export type EdgeConfigInput = typeof EdgeConfig.EdgeConfigSchema.Encoded

/** A config from its input, decoded as the config file is (errors name the field). */
export const decodeConfig = (input: EdgeConfigInput): Effect.Effect<EdgeConfig.EdgeConfigShape, ConfigError> =>
  decodeConfigJson("config", input)

/** The `EdgeConfig` service for a config written in code (decoded as the file is). */
export const configLayer = (input: EdgeConfigInput): Layer.Layer<EdgeConfig.EdgeConfig, ConfigError> =>
  Layer.effect(EdgeConfig.EdgeConfig, decodeConfig(input))

/**
 * `EdgeLive` and its `EdgeConfig` for a config written in code:
 * `Edge.layer({ models: [], runs: { idleTimeoutMs: 30_000 } })`.
 */
export const layer = (
  input: EdgeConfigInput
): Layer.Layer<EdgeServices | EdgeConfig.EdgeConfig, ConfigError | ApiKeySourceError> =>
  EdgeLive.pipe(Layer.provideMerge(configLayer(input)))

/** `layer` with the config read from Effect's `Config` (environment by default), e.g. `Config.all({...})`. */
export const layerConfig = (
  config: Config.Config<EdgeConfigInput>
): Layer.Layer<EdgeServices | EdgeConfig.EdgeConfig, ConfigErrorM.ConfigError | ConfigError | ApiKeySourceError> =>
  EdgeLive.pipe(Layer.provideMerge(Layer.effect(EdgeConfig.EdgeConfig, Effect.flatMap(config, decodeConfig))))

/** Routes served on a given HttpServer, with graceful shutdown, over the services you give. */
export const serveOn: Layer.Layer<never, never, HttpServer.HttpServer | EdgeServices | EdgeConfig.EdgeConfig> =
  // The app is installed first and removed last, so draining still answers new requests with 503.
  GracefulShutdownLive.pipe(Layer.provide(HttpAppLive))

/** `EdgeLive` served on a given HttpServer, with graceful shutdown. */
export const EdgeHttpLive: Layer.Layer<never, ApiKeySourceError, EdgeConfig.EdgeConfig | HttpServer.HttpServer> =
  serveOn.pipe(Layer.provide(EdgeLive))

/**
 * The whole edge process for a config: server on its host and port, embedded node (and the `nodes` you add,
 * e.g. the NATS transport). The key sources are resolved before the server binds its port.
 */
export const serverLayer = <E = never>(
  config: EdgeConfig.EdgeConfigShape,
  nodes: Layer.Layer<never, E, NodeRegistry | EdgeConfig.EdgeConfig> = Layer.empty
): Layer.Layer<never, HttpServerError.ServeError | ApiKeySourceError | E> =>
  serveOn.pipe(
    Layer.provide(
      compose({
        metrics: MetricsLive,
        nodes: Layer.merge(EmbeddedNodeLive, nodes)
      })
    ),
    // Nothing exports spans from the edge process: recording them would cost per request for nobody.
    // (A host app that mounts the layers keeps its own tracer.)
    HttpMiddleware.withTracerDisabledWhen(() => true),
    (layer) => Layer.locally(layer, FiberRef.currentTracerEnabled, false),
    Layer.provide(NodeServerLive),
    Layer.provide(EdgeConfig.layer(config))
  )
