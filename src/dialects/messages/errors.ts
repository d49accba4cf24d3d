import { type RunOutcomeError, upstreamRejectionAnswer } from "../../chat/errors.js"
import type { EdgeError, ErrorAnswer } from "../Dialect.js"

/**
 * Every error the Messages API answers with, in Anthropic's shape (`{"type": "error", "error": {type, message}}`)
 * and with Anthropic's types and statuses (docs.claude.com/en/api/errors), mapped here and nowhere else. The
 * headers are the OpenAI mapping's (dialects/openaiError.ts): the Anthropic SDK honours `x-should-retry` and
 * `retry-after` the same way.
 */

export type AnthropicErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "not_found_error"
  | "request_too_large"
  | "rate_limit_error"
  | "api_error"
  | "timeout_error"
  | "overloaded_error"

export interface AnthropicError {
  readonly type: AnthropicErrorType
  readonly message: string
}

export interface AnthropicErrorBody {
  readonly type: "error"
  readonly error: AnthropicError
}

/** Errors the edge already retried or waited out: the SDK must not retry them (it would retry every 5xx). */
const FINAL: Readonly<Record<string, string>> = { "x-should-retry": "false" }

/** Every 429, 503 and 529: the SDK waits this long before its retry. */
const RETRY_SOON: Readonly<Record<string, string>> = { "retry-after": "1" }

const answer = (
  status: number,
  type: AnthropicErrorType,
  message: string,
  headers?: Readonly<Record<string, string>>
): ErrorAnswer => {
  const body: AnthropicErrorBody = { type: "error", error: { type, message } }
  return headers === undefined ? { status, body } : { status, body, headers }
}

/** An upstream 4xx keeps its meaning (chat/errors.ts), in Anthropic's types. */
const rejection = (e: Extract<RunOutcomeError, { _tag: "UpstreamRejected" }>) => {
  const a = upstreamRejectionAnswer(e)
  const type: AnthropicErrorType = a.status === 400
    ? "invalid_request_error"
    : a.status === 413
    ? "request_too_large"
    : a.status === 429
    ? "rate_limit_error"
    : "api_error"
  // Anthropic's words for a prompt past the context: what Claude Code compacts on (any other 400 ends its turn).
  const message = a.status === 400 && a.code === "context_length_exceeded" ? `prompt is too long: ${a.message}` : a.message
  return { status: a.status, type, message }
}

/** Anthropic's own wording; `Authorization: Bearer` is accepted too. */
const unauthorized = {
  missing: "x-api-key header is required",
  incorrect: "invalid x-api-key",
  unknown: "missing or invalid x-api-key"
} as const

const TOOL_VALIDATION = "the model's tool calls failed validation"

/** The status, body and headers of an error answered before any response was written. */
export const toAnthropicError = (e: EdgeError): ErrorAnswer => {
  switch (e._tag) {
    case "InternalError":
      return answer(500, "api_error", e.message)
    case "InvalidRequest":
      return answer(400, "invalid_request_error", e.message)
    case "BodyTooLarge":
    case "RunRequestTooLarge":
      return answer(413, "request_too_large", e.message)
    case "Unauthorized":
      return answer(401, "authentication_error", unauthorized[e.reason ?? "unknown"])
    case "HostNotAllowed":
    case "OriginNotAllowed":
      return answer(403, "permission_error", e.message)
    case "RouteNotFound":
    case "ResponseNotFound":
      return answer(404, "not_found_error", e.message)
    // The Responses API's store (a Messages request never reads it): a passing outage.
    case "ResponseStoreError":
      return answer(503, "overloaded_error", e.message, RETRY_SOON)
    case "ModelNotFound":
      return answer(404, "not_found_error", `model: ${e.model.length > 100 ? `${e.model.slice(0, 100)}...` : e.model}`)
    case "RateLimited":
      return answer(429, "rate_limit_error", e.message, RETRY_SOON)
    // No node can take the run now: Anthropic's "temporarily overloaded".
    case "NoNodeForModel":
    case "NodesAtCapacity":
    case "NodeUnavailable":
      return answer(529, "overloaded_error", e.message, RETRY_SOON)
    case "ShuttingDown":
      return answer(503, "overloaded_error", e.message, RETRY_SOON)
    case "RunFailed":
      return answer(502, "api_error", e.message)
    case "RunTimedOut":
      return answer(504, "timeout_error", e.message, FINAL)
    case "ToolValidationFailed":
      return answer(502, "api_error", `${TOOL_VALIDATION}: ${e.message}`, FINAL)
    case "ToolValidationRetryFailed":
      return answer(502, "api_error", e.message)
    case "UpstreamRejected": {
      const r = rejection(e)
      const headers = r.status === 429 ? { "retry-after": String(Math.max(1, Math.ceil(e.retryAfter ?? 1))) } : FINAL
      return answer(r.status, r.type, r.message, headers)
    }
  }
}

/**
 * The `error` of the one `error` event that ends a stream that already started. Its type is one of those
 * Anthropic sends in streams: a timeout is an `api_error` there (`timeout_error` is an HTTP status's type; the
 * Effect AI client, for one, rejects it in an event).
 */
export const streamError = (e: RunOutcomeError): AnthropicError => {
  switch (e._tag) {
    case "UpstreamRejected": {
      const r = rejection(e)
      return { type: r.type, message: r.message }
    }
    case "RunFailed":
    case "RunTimedOut":
    case "ToolValidationRetryFailed":
      return { type: "api_error", message: e.message }
    case "ToolValidationFailed":
      return { type: "api_error", message: `${TOOL_VALIDATION}: ${e.message}` }
  }
}
