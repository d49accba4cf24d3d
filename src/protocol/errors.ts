import * as Schema from "effect/Schema"
import { NodeId } from "./RunEvent.js"

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


export class NodeDisconnected extends Schema.TaggedError<NodeDisconnected>()("NodeDisconnected", {
  nodeId: NodeId
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
  nodeId: NodeId,
  reason: Schema.String
}) {
  override get message(): string {
    return `node ${this.nodeId} is unavailable: ${this.reason}`
  }
}


/** No event of the run arrived for `runs.idleTimeoutMs`: the idle watchdog ended it. */
export class RunIdle extends Schema.TaggedError<RunIdle>()("RunIdle", { idleMs: Schema.Number }) {
  override get message(): string {
    return "run timed out"
  }
}

/** A run's time bounds: no progress (`idle`), no first output (`first_token`), the whole run (`max_run`). */
export const TimeoutBound = Schema.Literal("idle", "first_token", "max_run")
export type TimeoutBound = typeof TimeoutBound.Type

/** The bounds on a run's time beside its idle one: until its first output, and the whole run. */
export const RunBound = Schema.Literal("first_token", "max_run")
export type RunBound = typeof RunBound.Type

/**
 * A bound on the run's time passed: no first content, reasoning or tool-call output within
 * `runs.firstTokenTimeoutMs` (`first_token`), or the run went on for `runs.maxRunMs` (`max_run`); `ms` is the bound
 * (the model's own when it sets one). The run watchdog ended it.
 */
export class RunDeadline extends Schema.TaggedError<RunDeadline>()("RunDeadline", { bound: RunBound, ms: Schema.Number }) {
  override get message(): string {
    return this.bound === "first_token" ? `no first token within ${this.ms} ms` : `the run took longer than ${this.ms} ms`
  }
}

/**
 * The caller's socket took nothing for `runs.idleTimeoutMs` while the edge had output for it (a client that stopped
 * reading without closing): the run ended like an idle one, its upstream aborted and its slot released.
 */
export class WriteStalled extends Schema.TaggedError<WriteStalled>()("WriteStalled", { idleMs: Schema.Number }) {
  override get message(): string {
    return "client stopped reading"
  }
}

/** The edge cancelled the run (shutdown). */
export class RunCancelled extends Schema.TaggedError<RunCancelled>()("RunCancelled", { reason: Schema.String }) {
  override get message(): string {
    return this.reason
  }
}

/** How a run's events end other than by its own terminal event. */
export type RunError = NodeDisconnected | StreamClosed | RunIdle | RunDeadline | WriteStalled | RunCancelled

/** The run's request is larger than the transport carries (the NATS server's `max_payload`): no node can take it. */
export class RunRequestTooLarge extends Schema.TaggedError<RunRequestTooLarge>()("RunRequestTooLarge", {
  bytes: Schema.Number,
  limit: Schema.Number
}) {
  override get message(): string {
    return `the request is ${this.bytes} bytes, more than the message bus to the model's nodes carries (${this.limit})`
  }
}

/** Why a run could not be started; nothing ran, nothing was written. */
export type SubmitError = NoNodeForModel | NodesAtCapacity | NodeUnavailable | RunRequestTooLarge
