import * as AiError from "@effect/ai/AiError"
import { UpstreamRejected, upstreamRejectionAnswer } from "../chat/errors.js"
import type { RequestError, ResponseError } from "../dialects/chat-completions/ChatCompletions.js"

/**
 * The edge's typed failures as `@effect/ai`'s `AiError` (pure). No HTTP is involved, so none is an HTTP error:
 * what the caller asked for that the edge refuses is `MalformedInput`, an answer that broke the request's tool
 * rules (after the edge's replays) is `MalformedOutput`, the rest (limits, capacity, timeouts, failed runs) is
 * `UnknownError`. Each keeps the edge's error: its tag and message in `description`, the error itself as `cause`
 * (an upstream's refusal of the edge's credentials with the message the HTTP answer gives, never the upstream's text).
 */

export const MODULE = "EdgeLanguageModel"

export type Method = "generateText" | "streamText"

export type EdgeError = RequestError | ResponseError

/** What the edge says of an error: the upstream's own words only where its HTTP answer relays them. */
const told = (e: EdgeError): EdgeError => {
  if (e._tag !== "UpstreamRejected") return e
  const answer = upstreamRejectionAnswer(e)
  return answer.message === e.message ? e : new UpstreamRejected({
    status: e.status,
    code: e.code,
    message: answer.message,
    retryAfter: e.retryAfter
  })
}

export const fromEdgeError = (method: Method, error: EdgeError): AiError.AiError => {
  const cause = told(error)
  const fields = { module: MODULE, method, description: `${cause._tag}: ${cause.message}`, cause }
  switch (cause._tag) {
    case "InvalidRequest":
    case "ModelNotFound":
    case "RunRequestTooLarge":
      return new AiError.MalformedInput(fields)
    case "ToolValidationFailed":
      return new AiError.MalformedOutput(fields)
    case "UpstreamRejected":
      return upstreamRejectionAnswer(cause).type === "invalid_request_error"
        ? new AiError.MalformedInput(fields)
        : new AiError.UnknownError(fields)
    case "NoNodeForModel":
    case "NodesAtCapacity":
    case "NodeUnavailable":
    case "RateLimited":
    case "RunFailed":
    case "RunTimedOut":
    case "ToolValidationRetryFailed":
      return new AiError.UnknownError(fields)
  }
}

/** A prompt or option the edge has no wire form for. */
export const malformedInput = (method: Method, description: string): AiError.AiError =>
  new AiError.MalformedInput({ module: MODULE, method, description })

/** An answer the response parts cannot hold. */
export const malformedOutput = (method: Method, description: string): AiError.AiError =>
  new AiError.MalformedOutput({ module: MODULE, method, description })
