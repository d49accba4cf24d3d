import type * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { EdgeConfig } from "../config/EdgeConfig.js"
import type { NodeRegistry } from "./NodeRegistry.js"
import * as LocalNode from "./LocalNode.js"
import * as Node from "../node/Node.js"

/** The node inside the edge process: the config's `models` with their built-in providers, through `LocalNode`. */
export const layer: Layer.Layer<never, never, EdgeConfig | NodeRegistry | NodeHttpClient.Dispatcher> =
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const config = yield* EdgeConfig
      const models = yield* Node.servedFromConfig(config.models)
      return LocalNode.layer({ id: "embedded", models })
    })
  )
