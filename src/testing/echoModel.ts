import type * as Layer from "effect/Layer"
import * as LocalNode from "../run/LocalNode.js"
import * as Echo from "../providers/echo/Echo.js"
import type { NodeRegistry } from "../run/NodeRegistry.js"

/**
 * The built-in echo model without its token pacing: streams the last user message back, token by token, at
 * once, and reports usage. `TestEdge.layer({ nodes: layerEchoModel() })`; `layerEchoModel({ id: "strict", output: {
 * strict: true } })` for a model with options.
 */
export const layerEchoModel = (model: LocalNode.ModelInput = "echo"): Layer.Layer<never, never, NodeRegistry> =>
  LocalNode.layerModel(model, Echo.make({ tokenDelayMs: 0 }))
