import { upstreamRejectionAnswer } from "../chat/errors.js"
import type { EdgeError } from "./Dialect.js"

/** Every error the OpenAI APIs (Chat Completions, Responses) answer with, mapped to OpenAI's shape here and nowhere else. */
export type { EdgeError }

export interface OpenAiErrorBody {
  readonly error: {
    readonly message: string
    readonly type: string
    readonly param: string | null
    readonly code: string | null
  }
}

export interface HttpErrorResponse {
  readonly status: number
  readonly body: OpenAiErrorBody
  readonly headers?: Readonly<Record<string, string>>
}

const body = (message: string, type: string, param: string | null = null, code: string | null = null) => ({
  error: { message, type, param, code }
})

/**
 * OpenAI's SDKs retry 408/409/429/5xx unless told not to: errors the edge already retried or waited out say
 * so. 429 and 503 say `Retry-After` instead, where retrying is right.
 */
const FINAL = { "x-should-retry": "false" } as const

/** Every 429 and 503: the OpenAI SDKs wait this long before their retry. */
const RETRY_SOON: Readonly<Record<string, string>> = { "retry-after": "1" }

/** The status, body and headers of an error answered before any response was written. */
export const toHttpError = (e: EdgeError): HttpErrorResponse => {
  switch (e._tag) {
    case "InternalError":
      return { status: 500, body: body(e.message, "server_error") }
    case "InvalidRequest":
      return { status: 400, body: body(e.message, "invalid_request_error", e.param, e.code ?? null) }
    case "ResponseNotFound":
      return { status: 404, body: body(e.message, "invalid_request_error") }
    case "ResponseStoreError":
      return {
        status: 503,
        body: body(e.message, "service_unavailable", null, "service_unavailable"),
        headers: RETRY_SOON
      }
    case "BodyTooLarge":
    case "RunRequestTooLarge":
      return { status: 413, body: body(e.message, "invalid_request_error", null, "request_too_large") }
    case "Unauthorized":
      return { status: 401, body: body(e.message, "authentication_error", null, "invalid_api_key") }
    case "HostNotAllowed":
      return { status: 403, body: body(e.message, "invalid_request_error", null, "host_not_allowed") }
    case "OriginNotAllowed":
      return { status: 403, body: body(e.message, "invalid_request_error", null, "origin_not_allowed") }
    case "RouteNotFound":
      return { status: 404, body: body(e.message, "invalid_request_error", null, "not_found") }
    case "RateLimited":
      return {
        status: 429,
        body: body(e.message, "rate_limit_error", null, "rate_limit_exceeded"),
        headers: RETRY_SOON
      }
    case "ModelNotFound":
      return { status: 404, body: body(e.message, "invalid_request_error", "model", "model_not_found") }
    case "NoNodeForModel":
    case "NodesAtCapacity":
    case "NodeUnavailable":
    case "ShuttingDown":
      return {
        status: 503,
        body: body(e.message, "service_unavailable", null, "service_unavailable"),
        headers: RETRY_SOON
      }
    case "RunFailed":
      return { status: 502, body: body(e.message, "run_error") }
    case "RunTimedOut":
      return { status: 504, body: body(e.message, "timeout"), headers: FINAL }
    case "ToolValidationFailed":
      return { status: 502, body: body(e.message, "tool_validation_error"), headers: FINAL }
    case "UpstreamRejected": {
      const a = upstreamRejectionAnswer(e)
      const headers = a.status === 429 ? { "retry-after": String(Math.max(1, Math.ceil(e.retryAfter ?? 1))) } : FINAL
      return { status: a.status, body: body(a.message, a.type, null, a.code), headers }
    }
    case "ToolValidationRetryFailed":
      return { status: 502, body: body(e.message, "tool_validation_retry_error") }
  }
}
