/**
 * `iop-edge/nats`: remote nodes over NATS. The edge side (`layerEdge`: discovery into the NodeRegistry) and the
 * node side (`layerNode`: what `iop node` runs). Its own entry point, so that an embedded edge never loads the
 * NATS client; its types do not reference the client's either (they do not compile under
 * `exactOptionalPropertyTypes` with `skipLibCheck: false`).
 */
import type * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type * as HttpServerError from "@effect/platform/HttpServerError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ApiKeySourceError } from "./config/apiKeys.js"
import { EdgeConfig, type EdgeConfigShape, type ModelConfig } from "./config/EdgeConfig.js"
import * as Edge from "./Edge.js"
import type { NodeRegistry } from "./run/NodeRegistry.js"
import type { BusConfig, BusConnectFailed, NodeSettings } from "./node/nats/BusConfig.js"
import * as EdgeTransport from "./run/nats/EdgeTransport.js"
import * as NodeServer from "./node/nats/NodeServer.js"

export { BusConfig, BusConnectFailed, NodeSettings } from "./node/nats/BusConfig.js"

/**
 * The remote nodes of the config's `bus` (none without one), registered in the NodeRegistry while they
 * announce themselves: pass it as `nodes` to `Edge.layerFrom`, merged beside `Edge.layerEmbeddedNode` if you like.
 */
export const layerEdge: Layer.Layer<never, BusConnectFailed, EdgeConfig | NodeRegistry> = Layer.unwrapEffect(
  Effect.map(EdgeConfig, (c) => EdgeTransport.layerFromConfig(c.bus))
)

/** `Edge.layerServer` with the config's remote nodes: what `iop edge` runs. */
export const layerServer = (
  config: EdgeConfigShape
): Layer.Layer<never, HttpServerError.ServeError | ApiKeySourceError | BusConnectFailed> =>
  Edge.layerServer(config, layerEdge)

/**
 * A node serving `models` (with their built-in providers) to the edges on the bus until the layer is released,
 * then draining its runs for at most `drainTimeoutMs`: what `iop node` runs.
 */
export const layerNode = (options: {
  readonly bus: BusConfig
  readonly node: NodeSettings
  readonly models: ReadonlyArray<ModelConfig>
  readonly drainTimeoutMs?: number
}): Layer.Layer<never, BusConnectFailed, NodeHttpClient.Dispatcher> => NodeServer.layer(options)
