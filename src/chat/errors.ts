import * as Schema from "effect/Schema"
import { NodeDisconnected, RunCancelled, StreamClosed, TimeoutBound, WriteStalled } from "../protocol/errors.js"

/** Errors of a chat completion once its request was understood. Mapped to OpenAI errors in dialects/openaiError.ts. */

export class ModelNotFound extends Schema.TaggedError<ModelNotFound>()("ModelNotFound", { model: Schema.String }) {
  override get message(): string {
    return `The model "${this.model}" does not exist`
  }
}

/**
 * The run failed, was cancelled, its node disconnected or its stream broke. `cause`: the run plane's error, when
 * it ended the run (for the log; the client is told `reason`). Effect's errors pass a `cause` field on as the
 * native `Error.cause`.
 */
export class RunFailed extends Schema.TaggedError<RunFailed>()("RunFailed", {
  reason: Schema.String,
  cause: Schema.optional(Schema.Union(NodeDisconnected, StreamClosed, RunCancelled, WriteStalled))
}) {
  override get message(): string {
    return this.reason
  }
}

/** One of the run's time bounds passed (`bound`, of `ms`): the run plane ended it and aborted its upstream. */
export class RunTimedOut extends Schema.TaggedError<RunTimedOut>()("RunTimedOut", {
  bound: TimeoutBound,
  ms: Schema.Number
}) {
  override get message(): string {
    switch (this.bound) {
      case "idle":
        return "run timed out"
      case "first_token":
        return `run timed out: no output within ${this.ms} ms`
      case "max_run":
        return `run timed out: the run took longer than ${this.ms} ms`
    }
  }
}

/**
 * The answer's tool calls broke the request's rules. `tool`: the tool whose call was to blame, when one is — a call
 * to it with invalid arguments, or the function a named `tool_choice` forces (no call, or a call to another one); a
 * replay asks the upstream for a valid call of it (`SubmitRunRequest.replayTool`). Absent when no one tool is.
 */
export class ToolValidationFailed extends Schema.TaggedError<ToolValidationFailed>()("ToolValidationFailed", {
  reason: Schema.String,
  tool: Schema.optional(Schema.String)
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

/**
 * The upstream answered the run's request with a 4xx: its status, its own error `code`, its message
 * (clipped and scrubbed of credentials by the provider) and its `Retry-After` in seconds.
 */
export class UpstreamRejected extends Schema.TaggedError<UpstreamRejected>()("UpstreamRejected", {
  status: Schema.Number,
  code: Schema.NullOr(Schema.String),
  message: Schema.String,
  retryAfter: Schema.NullOr(Schema.Number)
}) {}

/** What the client is told of an upstream rejection, in OpenAI's terms (HTTP and SSE alike). */
export interface UpstreamRejectionAnswer {
  readonly status: number
  readonly type: string
  readonly code: string | null
  readonly message: string
}

export const CREDENTIALS_REFUSED = "the upstream refused the edge's credentials"

/**
 * An upstream 4xx keeps its meaning: 400 and 413 are the client's request, 429 its rate; the upstream's own
 * 401/403 refused the edge's credentials (its text, which may echo them, is never relayed); any other 4xx is
 * the run's failure, with the upstream's message.
 */
export const upstreamRejectionAnswer = (e: UpstreamRejected): UpstreamRejectionAnswer => {
  switch (e.status) {
    case 400:
      return { status: 400, type: "invalid_request_error", code: e.code, message: e.message }
    case 413:
      return { status: 413, type: "invalid_request_error", code: e.code ?? "request_too_large", message: e.message }
    case 429:
      return { status: 429, type: "rate_limit_error", code: e.code ?? "rate_limit_exceeded", message: e.message }
    case 401:
    case 403:
      return { status: 502, type: "run_error", code: null, message: CREDENTIALS_REFUSED }
    default:
      return { status: 502, type: "run_error", code: e.code, message: `upstream answered HTTP ${e.status}: ${e.message}` }
  }
}

/** A failure that ends a response after its run started. */
export type RunOutcomeError =
  | RunFailed
  | RunTimedOut
  | ToolValidationFailed
  | ToolValidationRetryFailed
  | UpstreamRejected
