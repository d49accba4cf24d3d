import type * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { EdgeConfig } from "../config/EdgeConfig.js"
import { NodeRegistry } from "../run/NodeRegistry.js"
import { NodeId } from "../run/RunEvent.js"
import * as InProcess from "../run/transport/InProcess.js"
import * as Node from "./Node.js"

/** The node inside the edge process, serving the config's `models` over the in-process transport. */
export class EmbeddedNode extends Context.Tag("@iop/edge/EmbeddedNode")<EmbeddedNode, Node.Node>() {}

export const EmbeddedNodeLive: Layer.Layer<EmbeddedNode, never, EdgeConfig | NodeRegistry | NodeHttpClient.Dispatcher> =
  Layer.scoped(
    EmbeddedNode,
    Effect.gen(function* () {
      const config = yield* EdgeConfig
      const registry = yield* NodeRegistry
      const node = yield* Node.make({
        id: NodeId.make("embedded"),
        models: config.models,
        maxConcurrentRuns: Number.POSITIVE_INFINITY
      })
      if (node.models.length > 0) yield* registry.register(InProcess.connect(node))
      return node
    })
  )
