import { describe, expect, it } from "@effect/vitest"
import {
  ModelNotFound,
  RunFailed,
  RunTimedOut,
  ToolValidationFailed,
  ToolValidationRetryFailed,
  UpstreamRejected
} from "../../../src/chat/errors.js"
import type { EdgeError } from "../../../src/dialects/Dialect.js"
import { streamError, toAnthropicError } from "../../../src/dialects/messages/errors.js"
import {
  BodyTooLarge,
  HostNotAllowed,
  InternalError,
  InvalidRequest,
  OriginNotAllowed,
  RateLimited,
  RouteNotFound,
  ShuttingDown,
  Unauthorized
} from "../../../src/chat/EdgeError.js"
import { NodesAtCapacity, NodeUnavailable, NoNodeForModel, RunRequestTooLarge } from "../../../src/protocol/errors.js"
import { NodeId } from "../../../src/protocol/RunEvent.js"

const rejected = (status: number, retryAfter: number | null = null) =>
  new UpstreamRejected({ status, code: "some_code", message: "upstream says no", retryAfter })

const FINAL = { "x-should-retry": "false" }
const SOON = { "retry-after": "1" }

describe("Anthropic error mapping: every EdgeError", () => {
  const table: ReadonlyArray<readonly [EdgeError, number, string, Record<string, string> | undefined]> = [
    [new InvalidRequest({ message: "max_tokens: missing (required)", param: "max_tokens" }), 400, "invalid_request_error", undefined],
    [new Unauthorized({ reason: "missing" }), 401, "authentication_error", undefined],
    [new HostNotAllowed({ host: "evil" }), 403, "permission_error", undefined],
    [new OriginNotAllowed({ origin: "https://evil" }), 403, "permission_error", undefined],
    [new ModelNotFound({ model: "claude-x" }), 404, "not_found_error", undefined],
    [new RouteNotFound({ method: "GET", path: "/v1/nope" }), 404, "not_found_error", undefined],
    [new BodyTooLarge({ limit: 10 }), 413, "request_too_large", undefined],
    [new RunRequestTooLarge({ bytes: 20, limit: 10 }), 413, "request_too_large", undefined],
    [new RateLimited({ scope: "key", limit: 2 }), 429, "rate_limit_error", SOON],
    [new InternalError(), 500, "api_error", undefined],
    [new RunFailed({ reason: "node disconnected" }), 502, "api_error", undefined],
    [new ToolValidationFailed({ reason: "bad" }), 502, "api_error", FINAL],
    [new ToolValidationRetryFailed({ reason: "no node" }), 502, "api_error", undefined],
    [new ShuttingDown(), 503, "overloaded_error", SOON],
    [new RunTimedOut({ bound: "idle", ms: 1 }), 504, "timeout_error", FINAL],
    [new NoNodeForModel({ model: "m" }), 529, "overloaded_error", SOON],
    [new NodesAtCapacity({ model: "m" }), 529, "overloaded_error", SOON],
    [new NodeUnavailable({ nodeId: NodeId.make("n1"), reason: "draining" }), 529, "overloaded_error", SOON],
    [rejected(400), 400, "invalid_request_error", FINAL],
    [rejected(413), 413, "request_too_large", FINAL],
    [rejected(429, 3), 429, "rate_limit_error", { "retry-after": "3" }],
    [rejected(401), 502, "api_error", FINAL],
    [rejected(404), 502, "api_error", FINAL]
  ]
  it.each(table)("%s → %i %s", (error, status, type, headers) => {
    const a = toAnthropicError(error)
    expect(a.status).toBe(status)
    expect(a.body).toMatchObject({ type: "error", error: { type } })
    expect(a.headers).toEqual(headers)
  })

  it("a prompt past the upstream's context is Anthropic's \"prompt is too long\" invalid_request_error (Claude Code compacts on it)", () => {
    const overflow = new UpstreamRejected({
      status: 400,
      code: "context_length_exceeded",
      message: "the request exceeds the available context size, try increasing it",
      retryAfter: null
    })
    expect(toAnthropicError(overflow)).toMatchObject({
      status: 400,
      body: { type: "error", error: { type: "invalid_request_error", message: "prompt is too long: the request exceeds the available context size, try increasing it" } }
    })
    expect(toAnthropicError(new UpstreamRejected({ status: 400, code: null, message: "other", retryAfter: null })).body).toMatchObject({ error: { message: "other" } })
  })

  it("messages: the key's problem in Anthropic's words, the model named, upstream credentials never relayed", () => {
    expect(toAnthropicError(new Unauthorized({ reason: "missing" })).body).toEqual({
      type: "error",
      error: { type: "authentication_error", message: "x-api-key header is required" }
    })
    expect(toAnthropicError(new Unauthorized({ reason: "incorrect" })).body).toMatchObject({ error: { message: "invalid x-api-key" } })
    expect(toAnthropicError(new ModelNotFound({ model: "claude-x" })).body).toMatchObject({ error: { message: "model: claude-x" } })
    expect(toAnthropicError(rejected(400)).body).toMatchObject({ error: { message: "upstream says no" } })
    expect(toAnthropicError(rejected(403)).body).toMatchObject({ error: { message: "the upstream refused the edge's credentials" } })
  })

  it("stream error events use the types Anthropic sends in streams: a timeout is an api_error", () => {
    expect(streamError(new RunTimedOut({ bound: "idle", ms: 1 }))).toEqual({ type: "api_error", message: "run timed out" })
    expect(streamError(new RunFailed({ reason: "x" }))).toEqual({ type: "api_error", message: "x" })
    expect(streamError(rejected(429))).toEqual({ type: "rate_limit_error", message: "upstream says no" })
    expect(streamError(new ToolValidationFailed({ reason: "r" })).message).toBe("the model's tool calls failed validation: r")
  })
})
