import { describe, expect, it } from "@effect/vitest"
import { ModelNotFound, RunFailed, RunTimedOut, ToolValidationFailed, ToolValidationRetryFailed } from "../../src/chat/errors.js"
import { BodyTooLarge, InvalidRequest, ShuttingDown, Unauthorized } from "../../src/chat/EdgeError.js"
import { sseError as toSseError } from "../../src/dialects/chat-completions/render.js"
import { toHttpError } from "../../src/dialects/openaiError.js"
import { NodesAtCapacity, NoNodeForModel } from "../../src/protocol/errors.js"

describe("OpenAI error mapping", () => {
  it.each([
    [new InvalidRequest({ message: "messages: missing", param: "messages" }), 400, "invalid_request_error", null],
    [new ModelNotFound({ model: "x" }), 404, "invalid_request_error", "model_not_found"],
    [new Unauthorized(), 401, "authentication_error", "invalid_api_key"],
    [new NoNodeForModel({ model: "x" }), 503, "service_unavailable", "service_unavailable"],
    [new NodesAtCapacity({ model: "x" }), 503, "service_unavailable", "service_unavailable"],
    [new ShuttingDown(), 503, "service_unavailable", "service_unavailable"],
    [new BodyTooLarge({ limit: 10 }), 413, "invalid_request_error", "request_too_large"],
    [new RunFailed({ reason: "boom" }), 502, "run_error", null],
    [new ToolValidationFailed({ reason: "bad" }), 502, "tool_validation_error", null],
    [new ToolValidationRetryFailed({ reason: "no node" }), 502, "tool_validation_retry_error", null],
    [new RunTimedOut({ bound: "idle", ms: 1 }), 504, "timeout", null]
  ] as const)("%s → %i %s", (error, status, type, code) => {
    const r = toHttpError(error)
    expect(r.status).toBe(status)
    expect(r.body.error).toMatchObject({ type, code, message: error.message })
  })

  it("401 messages say what is wrong with the key; all stay authentication_error / invalid_api_key", () => {
    const missing = toHttpError(new Unauthorized({ reason: "missing" }))
    expect(missing.status).toBe(401)
    expect(missing.body.error).toEqual({
      message: "Missing API key: pass it as 'Authorization: Bearer <key>'",
      type: "authentication_error",
      param: null,
      code: "invalid_api_key"
    })
    const incorrect = toHttpError(new Unauthorized({ reason: "incorrect" }))
    expect(incorrect.status).toBe(401)
    expect(incorrect.body.error).toMatchObject({ type: "authentication_error", code: "invalid_api_key" })
    expect(incorrect.body.error.message).toMatch(/^Incorrect API key provided/)
    expect(incorrect.body.error.message).not.toMatch(/missing/i)
    // Not told which: a message true of both.
    expect(toHttpError(new Unauthorized()).body.error.message).toMatch(/missing or incorrect/i)
  })

  it("mid-stream errors: a timeout is a run_error `run timed out`", () => {
    expect(toSseError(new RunTimedOut({ bound: "idle", ms: 1 }))).toEqual({ error: { type: "run_error", message: "run timed out" } })
    expect(toSseError(new RunFailed({ reason: "node disconnected" }))).toEqual({
      error: { type: "run_error", message: "node disconnected" }
    })
    expect(toSseError(new ToolValidationFailed({ reason: "r" })).error.type).toBe("tool_validation_error")
    expect(toSseError(new ToolValidationRetryFailed({ reason: "r" })).error.type).toBe("tool_validation_retry_error")
  })
})
