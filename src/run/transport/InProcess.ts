import type { Node } from "../../node/Node.js"
import type { NodeConnection } from "../NodeRegistry.js"

/**
 * The embedded transport: the edge pulls the node's event stream directly, so
 * the consumer's interruption reaches the provider with no message in between.
 */
export const connect = (node: Node): NodeConnection => ({
  id: node.id,
  models: node.models,
  maxConcurrentRuns: node.maxConcurrentRuns,
  start: (runId, request) => node.execute(runId, request)
})
