/**
 * `iop-edge/nats`: remote nodes over NATS. The edge side (`edgeLive`, discovery into the NodeRegistry) and the
 * node side (`nodeLayer`, what `iop node` runs). Its own entry point, so that an embedded edge never loads the
 * NATS client.
 */
import type * as HttpServerError from "@effect/platform/HttpServerError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ApiKeySourceError } from "./config/apiKeys.js"
import { EdgeConfig, type EdgeConfigShape } from "./config/EdgeConfig.js"
import * as Edge from "./Edge.js"
import type { NodeRegistry } from "./run/NodeRegistry.js"
import * as EdgeTransport from "./run/transport/nats/EdgeTransport.js"
import type { BusConnectFailed } from "./run/transport/nats/NatsBus.js"

export * as EdgeTransport from "./run/transport/nats/EdgeTransport.js"
export * as NodeServer from "./run/transport/nats/NodeServer.js"
export * as NatsBus from "./run/transport/nats/NatsBus.js"
export * as BusConfig from "./run/transport/nats/BusConfig.js"
export { BusConnectFailed } from "./run/transport/nats/NatsBus.js"

/**
 * The remote nodes of the config's `bus` (none without one), registered in the NodeRegistry while they
 * announce themselves: pass it as `nodes` to `Edge.compose`, or merge it beside `Edge.EmbeddedNodeLive`.
 */
export const edgeLive: Layer.Layer<never, BusConnectFailed, EdgeConfig | NodeRegistry> = Layer.empty.pipe(
  Layer.provide(Layer.unwrapEffect(Effect.map(EdgeConfig, (c) => EdgeTransport.layerFromConfig(c.bus))))
)

/** `Edge.serverLayer` with the config's remote nodes: what `iop edge` runs. */
export const serverLayer = (
  config: EdgeConfigShape
): Layer.Layer<never, HttpServerError.ServeError | ApiKeySourceError | BusConnectFailed> =>
  Edge.serverLayer(config, edgeLive)
