import { describe, expect, it } from "@effect/vitest"
import { RunFailed, UpstreamRejected } from "../../../src/chat/errors.js"
import { chunkRenderer, sseError } from "../../../src/dialects/chat-completions/render.js"

const rejected = (status: number, code: string | null = null) =>
  new UpstreamRejected({ status, code, message: "upstream says no (Bearer [redacted])", retryAfter: 3 })

describe("sseError: an upstream rejection after the stream started", () => {
  it("400 and 413 → invalid_request_error, 429 → rate_limit_error, with the upstream's message and code", () => {
    expect(sseError(rejected(400, "context_length_exceeded"))).toEqual({
      error: { type: "invalid_request_error", message: "upstream says no (Bearer [redacted])", code: "context_length_exceeded" }
    })
    expect(sseError(rejected(400))).toEqual({ error: { type: "invalid_request_error", message: "upstream says no (Bearer [redacted])" } })
    expect(sseError(rejected(413)).error).toMatchObject({ type: "invalid_request_error", code: "request_too_large" })
    expect(sseError(rejected(429)).error).toMatchObject({ type: "rate_limit_error", code: "rate_limit_exceeded" })
  })

  it("401/403 → run_error saying the edge's credentials were refused, never the upstream's text", () => {
    for (const status of [401, 403]) {
      expect(sseError(rejected(status, "invalid_api_key"))).toEqual({
        error: { type: "run_error", message: "the upstream refused the edge's credentials" }
      })
    }
  })

  it("other 4xx → run_error with the upstream's message", () => {
    for (const status of [404, 408, 409, 422]) {
      expect(sseError(rejected(status)).error).toMatchObject({
        type: "run_error",
        message: `upstream answered HTTP ${status}: upstream says no (Bearer [redacted])`
      })
    }
  })

  it("is one error event followed by [DONE]", () => {
    const render = chunkRenderer({ id: "chatcmpl-1", created: 1, model: "m", reasoningField: "reasoning_content", includeUsage: false })
    expect(render.batch([{ _tag: "Error", error: rejected(429) }])).toBe(
      `data: ${JSON.stringify(sseError(rejected(429)))}\n\ndata: [DONE]\n\n`
    )
    expect(sseError(new RunFailed({ reason: "x" }))).toEqual({ error: { type: "run_error", message: "x" } })
  })
})
