/**
 * `iop-edge/nats`: remote nodes over NATS. The edge side (`layerEdge`: discovery into the NodeRegistry), the
 * node side (`layerNode`: what `iop node` runs) and the response store on JetStream key-value (`layerResponseStore`). Its own entry point, so that an embedded edge never loads the
 * NATS client; its types do not reference the client's either (they do not compile under
 * `exactOptionalPropertyTypes` with `skipLibCheck: false`).
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type * as HttpServerError from "@effect/platform/HttpServerError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Schema from "effect/Schema"
import type { ApiKeySourceError } from "./config/apiKeys.js"
import { EdgeConfig, type EdgeConfigShape } from "./config/EdgeConfig.js"
import { InvalidConfig } from "./config/loadConfig.js"
import * as Edge from "./Edge.js"
import * as Logging from "./observability/Logging.js"
import * as Telemetry from "./observability/Telemetry.js"
import { modelOptions } from "./protocol/ModelOptions.js"
import type * as Provider from "./providers/Provider.js"
import type * as LocalNode from "./run/LocalNode.js"
import type { NodeRegistry } from "./run/NodeRegistry.js"
import { type BusConnectFailed, NatsConfig } from "./node/nats/BusConfig.js"
import * as EdgeTransport from "./run/nats/EdgeTransport.js"
import * as NodeServer from "./node/nats/NodeServer.js"
import * as NatsStore from "./store/NatsStore.js"
import type { ResponseStore } from "./store/ResponseStore.js"

export { BusConfig, BusConnectFailed, NodeSettings } from "./node/nats/BusConfig.js"

/**
 * The remote nodes of the config's `bus` (none without one), registered in the NodeRegistry while they
 * announce themselves: pass it as `nodes` to `Edge.layerFrom`, merged beside `Edge.layerEmbeddedNode` if you like.
 */
export const layerEdge: Layer.Layer<never, BusConnectFailed, EdgeConfig | NodeRegistry> = Layer.unwrapEffect(
  // Discovery logs (nodes joining, leaving, changing) at the config's level, as the edge's requests do.
  Effect.map(EdgeConfig, (c) =>
    EdgeTransport.layerFromConfig(c.bus).pipe(Layer.provide(Logger.minimumLogLevel(Logging.levels[c.log.level]))))
)

/**
 * The response store the config's `responses.store` selects, NATS JetStream key-value included (`kind: "nats"`:
 * a bucket every edge naming it shares; its `nats` settings default to the `bus`'s): pass it as `responseStore`
 * to `Edge.layerFrom`. A bucket that cannot be opened at start is a `BusConnectFailed`.
 */
export const layerResponseStore: Layer.Layer<ResponseStore, BusConnectFailed, EdgeConfig> = Layer.unwrapEffect(
  Effect.map(EdgeConfig, (c) => {
    const store = c.responses.store
    if (store.kind !== "nats") return Edge.layerResponseStore
    const nats = store.nats ?? c.bus?.nats ?? Schema.decodeSync(NatsConfig)({})
    return NatsStore.layer({ nats, bucket: store.bucket, ttlMs: store.ttlMs })
  })
)

/** `Edge.layerServer` with the config's remote nodes and response store: what `iop edge` runs. */
export const layerServer = (
  config: EdgeConfigShape
): Layer.Layer<never, HttpServerError.ServeError | ApiKeySourceError | BusConnectFailed> =>
  Edge.layerServer(config, layerEdge, layerResponseStore)

/** A model served by a provider of your own on a node: its id (or options) and the provider. */
export interface NodeProvider {
  readonly model: LocalNode.ModelInput
  readonly provider: Provider.Provider
}

/**
 * A node on the bus, configured as the edge is (`Edge.layer`'s input, the config file's JSON shape): `bus` and
 * `node` required, `models` served by the built-in providers, `providers` by your own (the same door as
 * `LocalNode.layerModel`), `server.shutdownGraceMs` how long its runs may finish when the layer is released
 * (then the rest are cancelled), `log.level` its logs. What `iop node` runs, with your providers beside.
 */
export const layerNode = (
  input: Edge.EdgeConfigInput,
  options: { readonly providers?: ReadonlyArray<NodeProvider> } = {}
): Layer.Layer<never, BusConnectFailed | InvalidConfig> =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const config = yield* Edge.decodeConfig(input)
      if (config.bus === undefined) return yield* Effect.fail(new InvalidConfig({ file: "config", detail: "$.bus: missing (required by a node)" }))
      if (config.node === undefined) return yield* Effect.fail(new InvalidConfig({ file: "config", detail: "$.node: missing (required by a node)" }))
      return NodeServer.layer({
        bus: config.bus,
        node: config.node,
        models: config.models,
        providers: (options.providers ?? []).map((p) => ({ model: modelOptions(p.model), provider: p.provider })),
        drainTimeoutMs: config.server.shutdownGraceMs
      }).pipe(
        Layer.provide(NodeHttpClient.dispatcherLayer),
        Telemetry.provideExporter(config.telemetry, "iop-node"),
        Layer.provide(Logger.minimumLogLevel(Logging.levels[config.log.level]))
      )
    })
  )
