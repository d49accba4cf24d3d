import * as Effect from "effect/Effect"
import type { Node } from "../node/Node.js"
import type { NodeConnection } from "./NodeRegistry.js"

/**
 * The embedded transport: the node's provider writes straight into the run's
 * sink, and the run's scope is the provider's, so closing it aborts the
 * upstream request with no message in between.
 */
export const connect = (node: Node): NodeConnection => ({
  id: node.id,
  models: node.models,
  maxConcurrentRuns: node.maxConcurrentRuns,
  start: (runId, request, sink) => Effect.asVoid(node.execute(runId, request, sink))
})
