import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { modelOptions } from "../protocol/ModelOptions.js"
import type { ModelOptions as ModelOptionsSchema } from "../protocol/ModelOptions.js"
import type { Provider } from "../providers/Provider.js"
import { NodeRegistry } from "./NodeRegistry.js"
import { NodeId } from "../protocol/RunEvent.js"
import * as InProcess from "./InProcess.js"
import * as Node from "../node/Node.js"

/** A model as a caller of `serve` names it: its id, or its options (defaults filled in). */
export type { ServedModel } from "../node/Node.js"

export type ModelInput = string | typeof ModelOptionsSchema.Encoded

export interface LocalNodeOptions {
  /** The node's id in logs and metrics; unique among the registered nodes. */
  readonly id: string
  readonly models: ReadonlyArray<Node.ServedModel>
  /** Runs it takes at once (default: unlimited); more go to another node serving the model, or get 429. */
  readonly maxConcurrentRuns?: number
  /** Its share of the load among the nodes of a model when it has no `maxConcurrentRuns` (default 1). */
  readonly weight?: number
}

/**
 * A node in this process, registered (so its models are served over HTTP and by `RunService`) until the
 * layer's scope closes. Runs go straight into the provider over the in-process transport. The edge's own
 * configured models are served through this door too (`EmbeddedNodeLive`).
 */
export const layer = (options: LocalNodeOptions): Layer.Layer<never, never, NodeRegistry> =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      if (options.models.length === 0) return
      const registry = yield* NodeRegistry
      const node = Node.make({
        id: NodeId.make(options.id),
        models: options.models,
        maxConcurrentRuns: options.maxConcurrentRuns ?? Number.POSITIVE_INFINITY
      })
      const connection = InProcess.connect(node)
      yield* registry.register(options.weight === undefined ? connection : { ...connection, weight: options.weight })
    })
  )

/**
 * One model served by your provider: `LocalNode.layerModel("mine", Provider.fromStream(...))`. The provider may be
 * built by an effect (it is built once, when the layer is). The node's id is `local:<model id>`.
 */
export const layerModel = <E = never, R = never>(
  model: ModelInput,
  provider: Provider | Effect.Effect<Provider, E, R>,
  options?: { readonly maxConcurrentRuns?: number }
): Layer.Layer<never, E, R | NodeRegistry> => {
  const served = modelOptions(model)
  return Layer.unwrapEffect(
    Effect.map(Effect.isEffect(provider) ? provider : Effect.succeed(provider), (p) =>
      layer({
        id: `local:${served.id}`,
        models: [{ model: served, provider: p }],
        ...(options?.maxConcurrentRuns !== undefined ? { maxConcurrentRuns: options.maxConcurrentRuns } : {})
      }))
  )
}
