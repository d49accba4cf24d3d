import * as Schema from "effect/Schema"

/** Errors of a chat completion once its request was understood. Mapped to OpenAI errors in http/openaiError.ts. */

export class ModelNotFound extends Schema.TaggedError<ModelNotFound>()("ModelNotFound", { model: Schema.String }) {
  override get message(): string {
    return `The model "${this.model}" does not exist`
  }
}

/** The run failed, was cancelled, its node disconnected or its stream broke. */
export class RunFailed extends Schema.TaggedError<RunFailed>()("RunFailed", { reason: Schema.String }) {
  override get message(): string {
    return this.reason
  }
}

export class RunTimedOut extends Schema.TaggedError<RunTimedOut>()("RunTimedOut", { idleMs: Schema.Number }) {
  override get message(): string {
    return "run timed out"
  }
}

export class ToolValidationFailed extends Schema.TaggedError<ToolValidationFailed>()("ToolValidationFailed", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/** A retry was due but its run could not be submitted. */
export class ToolValidationRetryFailed extends Schema.TaggedError<ToolValidationRetryFailed>()(
  "ToolValidationRetryFailed",
  { reason: Schema.String }
) {
  override get message(): string {
    return `tool validation retry could not be submitted: ${this.reason}`
  }
}

/** Every node offered the run refused it (all at capacity or draining) before it produced anything. */
export class NoNodeAccepted extends Schema.TaggedError<NoNodeAccepted>()("NoNodeAccepted", { reason: Schema.String }) {
  override get message(): string {
    return `no node could take the run: ${this.reason}`
  }
}

/** A failure that ends a response after its run started. */
export type RunOutcomeError = RunFailed | RunTimedOut | ToolValidationFailed | ToolValidationRetryFailed | NoNodeAccepted
