import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import type * as HttpServer from "@effect/platform/HttpServer"
import type * as HttpServerError from "@effect/platform/HttpServerError"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as ChatRun from "./chat/ChatRun.js"
import { type ApiKeySourceError, ApiKeysLive } from "./config/apiKeys.js"
import { ChatCompletions, ChatCompletionsLive } from "./dialects/chat-completions/ChatCompletions.js"
import { Responder, ResponderLive } from "./dialects/Responder.js"
import * as EdgeConfig from "./config/EdgeConfig.js"
import { GracefulShutdownLive, HttpAppLive, NodeServerLive } from "./http/HttpLive.js"
import { Lifecycle, LifecycleLive } from "./http/Lifecycle.js"
import { Limits, LimitsLive } from "./http/Limits.js"
import { EmbeddedNode, EmbeddedNodeLive } from "./node/EmbeddedNode.js"
import { Metrics, MetricsLive } from "./observability/Metrics.js"
import { NodeRegistry, NodeRegistryLive } from "./run/NodeRegistry.js"
import * as RunServiceM from "./run/RunService.js"
import { RunService } from "./run/RunService.js"
import * as EdgeTransport from "./run/transport/nats/EdgeTransport.js"
import type { BusConnectFailed } from "./run/transport/nats/NatsBus.js"

/** Remote nodes over NATS when the config has a `bus`; none otherwise. */
const BusLive: Layer.Layer<EdgeTransport.NatsDiscovery, BusConnectFailed, EdgeConfig.EdgeConfig | NodeRegistry> =
  Layer.unwrapEffect(EdgeConfig.EdgeConfig.pipe(Effect.map((c) => EdgeTransport.layerFromConfig(c.bus))))

/** The run service with the config's idle timeout. */
export const RunServiceLive: Layer.Layer<RunService, never, EdgeConfig.EdgeConfig | NodeRegistry> = Layer.unwrapEffect(
  EdgeConfig.EdgeConfig.pipe(Effect.map((c) => RunServiceM.layer({ idleTimeoutMs: c.runs.idleTimeoutMs })))
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
  | Responder
  | ChatRun.Chat
  | RunService
  | NodeRegistry
  | EmbeddedNode
  | EdgeTransport.NatsDiscovery
  | Metrics
  | Lifecycle
  | Limits

/** The edge's services, reading the EdgeConfig they are given as it is. */
const ServicesLive: Layer.Layer<
  EdgeServices,
  BusConnectFailed,
  EdgeConfig.EdgeConfig | NodeHttpClient.Dispatcher
> = ChatCompletionsLive.pipe(
  Layer.provideMerge(ResponderLive),
  Layer.provideMerge(ChatLive),
  Layer.provideMerge(RunServiceLive),
  Layer.provideMerge(Layer.merge(EmbeddedNodeLive, BusLive)),
  Layer.provideMerge(NodeRegistryLive),
  Layer.provideMerge(Layer.mergeAll(MetricsLive, LifecycleLive, LimitsLive))
)

/**
 * The config with `server.apiKeysFile` / `server.apiKeysEnv` read into
 * `server.apiKeys`. Every layer below that builds the edge goes through it, so
 * a key source is enforced (or, yielding no key, stops the build) however the
 * edge is assembled; a config already resolved passes through unchanged.
 */
const ResolvedConfigLive: Layer.Layer<EdgeConfig.EdgeConfig, ApiKeySourceError, EdgeConfig.EdgeConfig> = ApiKeysLive.pipe(
  Layer.provide(NodeFileSystem.layer)
)

/**
 * The edge's services without a server: mount `HttpAppLive` on your own
 * HttpServer, or call `ChatCompletions` / `RunService` directly.
 */
export const EdgeLive: Layer.Layer<
  EdgeServices,
  BusConnectFailed | ApiKeySourceError,
  EdgeConfig.EdgeConfig | NodeHttpClient.Dispatcher
> = ServicesLive.pipe(Layer.provide(ResolvedConfigLive))

/** Routes served on a given HttpServer, with graceful shutdown. */
export const EdgeHttpLive: Layer.Layer<
  never,
  BusConnectFailed | ApiKeySourceError,
  EdgeConfig.EdgeConfig | NodeHttpClient.Dispatcher | HttpServer.HttpServer
> =
  // The app is installed first and removed last, so draining still answers new requests with 503.
  GracefulShutdownLive.pipe(Layer.provide(HttpAppLive), Layer.provide(ServicesLive), Layer.provide(ResolvedConfigLive))

/**
 * The whole edge process for a config: server on its host and port, embedded
 * node, an undici pool for upstreams. The key sources are resolved before the
 * server binds its port.
 */
export const serverLayer = (
  config: EdgeConfig.EdgeConfigShape
): Layer.Layer<never, HttpServerError.ServeError | BusConnectFailed | ApiKeySourceError> =>
  EdgeHttpLive.pipe(
    // Nothing exports spans from the edge process: recording them would cost per request for nobody.
    // (A host app that mounts the layers keeps its own tracer.)
    HttpMiddleware.withTracerDisabledWhen(() => true),
    (layer) => Layer.locally(layer, FiberRef.currentTracerEnabled, false),
    Layer.provide(NodeServerLive),
    Layer.provide(NodeHttpClient.dispatcherLayer),
    Layer.provide(ResolvedConfigLive),
    Layer.provide(EdgeConfig.layer(config))
  )
