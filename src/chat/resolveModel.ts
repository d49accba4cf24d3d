import * as Effect from "effect/Effect"
import type { ModelOptions } from "../protocol/ModelOptions.js"
import { NoNodeForModel } from "../protocol/errors.js"
import type { NodeRegistry } from "../run/NodeRegistry.js"
import { ModelNotFound } from "./errors.js"

/**
 * The model a caller's name (an id or an alias) names, as a registered node (local or remote) serves it. A name
 * some node served before, with no live node now (node gone, bus down), is an outage (`NoNodeForModel`, 503),
 * not an unknown model (`ModelNotFound`, 404).
 */
export const resolveModel = (registry: NodeRegistry.Service) => (
  name: string
): Effect.Effect<ModelOptions, ModelNotFound | NoNodeForModel> =>
  Effect.suspend(() => {
    const model = registry.findModel(name)
    if (model !== undefined) return Effect.succeed(model)
    return Effect.fail(registry.wasServed(name) ? new NoNodeForModel({ model: name }) : new ModelNotFound({ model: name }))
  })
