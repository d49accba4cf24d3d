/**
 * The edge's services put together (internal): every service, the door and the response path included, for the
 * public layers of `Edge.ts` to build on and for tests that call internal services. The public layers hand out
 * the internal ones only inside the opaque `EdgeInternals`.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ChatRun from "./chat/ChatRun.js"
import * as Gateway from "./chat/Gateway.js"
import * as Limits from "./chat/Limits.js"
import { makeReasoningMemory } from "./chat/reasoningMemory.js"
import * as Responder from "./chat/Responder.js"
import { type ApiKeySourceError, layer as apiKeysLayer } from "./config/apiKeys.js"
import { EdgeConfig } from "./config/EdgeConfig.js"
import { ChatCompletions } from "./dialects/chat-completions/ChatCompletions.js"
import { layer as chatCompletionsLayer } from "./dialects/chat-completions/typedApi.js"
import * as StoredResponses from "./dialects/responses/StoredResponses.js"
import * as Lifecycle from "./http/Lifecycle.js"
import * as Shutdown from "./http/Shutdown.js"
import { Metrics } from "./observability/Metrics.js"
import * as NodeRegistry from "./run/NodeRegistry.js"
import * as RunService from "./run/RunService.js"
import * as MemoryStore from "./store/MemoryStore.js"
import { layerNone, ResponseStore, ResponseStore as ResponseStoreTag } from "./store/ResponseStore.js"

/** The run service with the config's run bounds. */
export const runServiceLayer: Layer.Layer<RunService.RunService, never, EdgeConfig | NodeRegistry.NodeRegistry> =
  Layer.unwrapEffect(EdgeConfig.pipe(Effect.map(({ runs }) =>
    RunService.layer({
      idleTimeoutMs: runs.idleTimeoutMs,
      wholeAnswerTimeoutMs: runs.wholeAnswerTimeoutMs,
      ...(runs.firstTokenTimeoutMs !== undefined ? { firstTokenTimeoutMs: runs.firstTokenTimeoutMs } : {}),
      ...(runs.maxRunMs !== undefined ? { maxRunMs: runs.maxRunMs } : {})
    })
  )))

/** The run plane: the registry of nodes (the model catalogue) and the run service over it. */
export const runPlaneLayer: Layer.Layer<RunService.RunService | NodeRegistry.NodeRegistry, never, EdgeConfig> =
  runServiceLayer.pipe(Layer.provideMerge(NodeRegistry.layer))

/** The chat plane with the config's retry and trace settings. */
export const chatLayer: Layer.Layer<ChatRun.Chat, never, EdgeConfig | RunService.RunService | Metrics> =
  Layer.unwrapEffect(
    EdgeConfig.pipe(
      Effect.map((c) =>
        ChatRun.layer({
          toolValidationAttempts: c.runs.toolValidationAttempts,
          traceStreams: c.log.traceStreams,
          reasoningMemory: makeReasoningMemory(c.runs.reasoningMemory)
        })
      )
    )
  )

/**
 * The response store the config selects, of those this entry can build: in memory (the default) or none. A NATS
 * store is built by `iop-edge/nats` (`layerResponseStore`), so that this one never loads the NATS client.
 */
export const responseStoreLayer: Layer.Layer<ResponseStore, never, EdgeConfig> = Layer.unwrapEffect(
  EdgeConfig.pipe(
    Effect.map((c) => {
      const store = c.responses.store
      switch (store.kind) {
        case "memory":
          return MemoryStore.layer({ maxEntries: store.maxResponses, maxBytes: store.maxBytes, ttlMs: store.ttlMs })
        case "none":
          return layerNone
        case "nats":
          return Layer.die(
            "responses.store.kind \"nats\" is built by iop-edge/nats: serve with its layerServer, or give its layerResponseStore to Edge.layerFrom"
          )
      }
    })
  )
)

/** The services a user of the edge may name. */
export type PublicServices = ChatCompletions | RunService.RunService | NodeRegistry.NodeRegistry | Metrics

/**
 * The edge's own services: the door, the response path, the chat plane, limits, the lifecycle and its drain, the
 * stored responses and their store.
 */
export type InternalServices =
  | Gateway.Gateway
  | StoredResponses.StoredResponses
  | ResponseStore
  | Responder.Responder
  | ChatRun.Chat
  | Lifecycle.Lifecycle
  | Shutdown.Shutdown
  | Limits.Limits

let contextOfInternals: (internals: Internals) => Context.Context<InternalServices>
let makeInternals: (context: Context.Context<InternalServices>) => Internals

/** The edge's own services, held opaque: what `routes`, `middleware` and the serving layers read. */
export class Internals {
  readonly #context: Context.Context<InternalServices>
  private constructor(context: Context.Context<InternalServices>) {
    this.#context = context
  }
  static {
    contextOfInternals = (internals) => internals.#context
    makeInternals = (context) => new Internals(context)
  }
}

/** The tag of the edge's own services (opaque): provided by `Edge.layerFrom`, read by the routes. */
export class EdgeInternals extends Context.Tag("@iop/edge/EdgeInternals")<EdgeInternals, Internals>() {}

/**
 * The config with `server.apiKeysFile` / `server.apiKeysEnv` read into `server.apiKeys`. Every layer that builds
 * the edge goes through it, so a key source is enforced (or, yielding no key, stops the build) however the edge
 * is assembled; a config already resolved passes through unchanged.
 */
const resolvedConfigLayer: Layer.Layer<EdgeConfig, ApiKeySourceError, EdgeConfig> = apiKeysLayer.pipe(
  Layer.provide(NodeFileSystem.layer)
)

/** What the edge is put together from: its metrics, the nodes that serve its models, its response store. */
export interface Parts<E, E2> {
  readonly metrics: Layer.Layer<Metrics>
  readonly nodes: Layer.Layer<never, E, NodeRegistry.NodeRegistry | EdgeConfig>
  readonly responseStore: Layer.Layer<ResponseStore, E2, EdgeConfig>
}

/** Every service of the edge, internal ones included, from its parts. */
export const composeAll = <E, E2>(
  parts: Parts<E, E2>
): Layer.Layer<PublicServices | InternalServices | EdgeConfig, E | E2 | ApiKeySourceError, EdgeConfig> =>
  // The drain is built last, so it is closed first: open runs are drained and cancelled while the nodes and the
  // run plane still serve them (a node's upstream pool, closed, would cut its open runs without a grace period).
  Shutdown.layer.pipe(Layer.provideMerge(Layer.mergeAll(chatCompletionsLayer, parts.nodes, StoredResponses.layer).pipe(
    Layer.provideMerge(Gateway.layer),
    Layer.provideMerge(Responder.layer),
    Layer.provideMerge(chatLayer),
    Layer.provideMerge(runPlaneLayer),
    Layer.provideMerge(Layer.mergeAll(parts.metrics, Lifecycle.layer, Limits.layerFromConfig, parts.responseStore)),
    Layer.provideMerge(resolvedConfigLayer)
  )))

/** `composeAll` with the internal services put away in `EdgeInternals`. */
export const compose = <E, E2>(
  parts: Parts<E, E2>
): Layer.Layer<PublicServices | EdgeInternals | EdgeConfig, E | E2 | ApiKeySourceError, EdgeConfig> =>
  Layer.effectContext(
    Effect.map(Effect.context<PublicServices | InternalServices | EdgeConfig>(), (all) =>
      Context.pick(ChatCompletions, RunService.RunService, NodeRegistry.NodeRegistry, Metrics, EdgeConfig)(all).pipe(
        Context.add(
          EdgeInternals,
          makeInternals(
            Context.pick(
              Gateway.Gateway,
              Responder.Responder,
              ChatRun.Chat,
              Lifecycle.Lifecycle,
              Shutdown.Shutdown,
              Limits.Limits,
              StoredResponses.StoredResponses,
              ResponseStoreTag
            )(all)
          )
        )
      ))
  ).pipe(Layer.provide(composeAll(parts)))

/** Provides the edge's own services, from `EdgeInternals`, to an effect that needs some of them. */
export const withInternals = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, Exclude<R, InternalServices> | EdgeInternals> =>
  Effect.flatMap(EdgeInternals, (internals) => Effect.provide(effect, contextOfInternals(internals)))

/** Provides the edge's own services, from `EdgeInternals`, to a layer that needs some of them. */
export const layerWithInternals = <A, E, R>(
  layer: Layer.Layer<A, E, R>
): Layer.Layer<A, E, Exclude<R, InternalServices> | EdgeInternals> =>
  Layer.unwrapEffect(
    Effect.map(EdgeInternals, (internals) => layer.pipe(Layer.provide(Layer.succeedContext(contextOfInternals(internals)))))
  )

/** A layer that provides `EdgeInternals`, with the edge's own services beside it (for tests of internal services). */
export const exposeInternals = <A, E, R>(
  layer: Layer.Layer<A | EdgeInternals, E, R>
): Layer.Layer<A | EdgeInternals | InternalServices, E, R> =>
  Layer.provideMerge(Layer.effectContext(Effect.map(EdgeInternals, (internals) => contextOfInternals(internals))), layer)
