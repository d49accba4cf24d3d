import * as Schema from "effect/Schema"

/** Errors of the run plane. Submit errors happen before a run exists; run errors end its event stream. */

export class NoNodeForModel extends Schema.TaggedError<NoNodeForModel>()("NoNodeForModel", { model: Schema.String }) {
  override get message(): string {
    return `no node serves model "${this.model}"`
  }
}

export class NodesAtCapacity extends Schema.TaggedError<NodesAtCapacity>()("NodesAtCapacity", {
  model: Schema.String
}) {
  override get message(): string {
    return `every node serving model "${this.model}" is at capacity`
  }
}

export type SubmitError = NoNodeForModel | NodesAtCapacity

export class NodeDisconnected extends Schema.TaggedError<NodeDisconnected>()("NodeDisconnected", {
  nodeId: Schema.String
}) {
  override get message(): string {
    return "node disconnected"
  }
}

/** The run's event stream ended without a terminal event. */
export class StreamClosed extends Schema.TaggedError<StreamClosed>()("StreamClosed", {}) {
  override get message(): string {
    return "run stream closed"
  }
}

/**
 * The node refused the run (at capacity, draining, model not served) or did
 * not answer. Raised only before the run's first event: nothing ran, so the
 * RunService may try another node.
 */
export class NodeUnavailable extends Schema.TaggedError<NodeUnavailable>()("NodeUnavailable", {
  nodeId: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `node ${this.nodeId} is unavailable: ${this.reason}`
  }
}

export type RunError = NodeDisconnected | StreamClosed | NodeUnavailable
