import { describe, expect, it } from "@effect/vitest"
import {
  RunFailed,
  RunTimedOut,
  ToolValidationFailed,
  ToolValidationRetryFailed,
  UpstreamRejected
} from "../../src/chat/errors.js"
import { toHttpError } from "../../src/dialects/openaiError.js"

const rejected = (status: number, fields: Partial<{ code: string; message: string; retryAfter: number }> = {}) =>
  new UpstreamRejected({
    status,
    code: fields.code ?? null,
    message: fields.message ?? "upstream says no",
    retryAfter: fields.retryAfter ?? null
  })

const FINAL = { "x-should-retry": "false" }

describe("upstream errors keep their meaning (toHttpError)", () => {
  it("400 → 400 invalid_request_error with the upstream's code and message, final", () => {
    expect(toHttpError(rejected(400, { code: "context_length_exceeded", message: "too many tokens" }))).toEqual({
      status: 400,
      body: { error: { message: "too many tokens", type: "invalid_request_error", param: null, code: "context_length_exceeded" } },
      headers: FINAL
    })
    expect(toHttpError(rejected(400)).body.error.code).toBeNull()
  })

  it("429 → 429 rate_limit_error with the upstream's Retry-After, or 1; retrying is right (no x-should-retry)", () => {
    const limited = toHttpError(rejected(429, { retryAfter: 7, message: "slow down" }))
    expect(limited).toEqual({
      status: 429,
      body: { error: { message: "slow down", type: "rate_limit_error", param: null, code: "rate_limit_exceeded" } },
      headers: { "retry-after": "7" }
    })
    expect(toHttpError(rejected(429)).headers).toEqual({ "retry-after": "1" })
    expect(toHttpError(rejected(429, { retryAfter: 0.2 })).headers).toEqual({ "retry-after": "1" })
    expect(toHttpError(rejected(429, { code: "insufficient_quota" })).body.error.code).toBe("insufficient_quota")
  })

  it("413 → 413 invalid_request_error, final", () => {
    const r = toHttpError(rejected(413, { message: "payload too large" }))
    expect(r.status).toBe(413)
    expect(r.body.error).toMatchObject({ type: "invalid_request_error", message: "payload too large", code: "request_too_large" })
    expect(r.headers).toEqual(FINAL)
  })

  it.each([401, 403])("%i (the edge's own credentials refused) → 502 run_error, never the upstream's text", (status) => {
    const r = toHttpError(rejected(status, { message: "Invalid key Bearer sk-secret", code: "invalid_api_key" }))
    expect(r).toEqual({
      status: 502,
      body: { error: { message: "the upstream refused the edge's credentials", type: "run_error", param: null, code: null } },
      headers: FINAL
    })
  })

  it.each([402, 404, 405, 408, 409, 418, 422, 451, 499])("other 4xx (%i) → 502 run_error with the upstream's message, final", (status) => {
    const r = toHttpError(rejected(status, { message: "no such thing", code: "model_not_found" }))
    expect(r.status).toBe(502)
    expect(r.body.error).toEqual({
      message: `upstream answered HTTP ${status}: no such thing`,
      type: "run_error",
      param: null,
      code: "model_not_found"
    })
    expect(r.headers).toEqual(FINAL)
  })

  it("every 4xx maps to 400, 413, 429 or 502, and every one but 429 is final", () => {
    for (let status = 400; status < 500; status++) {
      const r = toHttpError(rejected(status))
      expect(r.status).toBe(status === 400 || status === 413 || status === 429 ? status : 502)
      expect(r.headers).toEqual(status === 429 ? { "retry-after": "1" } : FINAL)
    }
  })

  it("an upstream 5xx is a RunFailed: 502 run_error, left to the client to retry", () => {
    const r = toHttpError(new RunFailed({ reason: "upstream answered HTTP 503: loading" }))
    expect(r.status).toBe(502)
    expect(r.body.error.type).toBe("run_error")
    expect(r.headers).toBeUndefined()
  })
})

describe("final errors say so (x-should-retry: false)", () => {
  it("errors the edge already retried or waited out: tool_validation_error, timeout", () => {
    expect(toHttpError(new ToolValidationFailed({ reason: "bad" })).headers).toEqual(FINAL)
    expect(toHttpError(new RunTimedOut({ bound: "idle", ms: 1 })).headers).toEqual(FINAL)
  })

  it("others are left to the client's own retry policy", () => {
    expect(toHttpError(new RunFailed({ reason: "node disconnected" })).headers).toBeUndefined()
    expect(toHttpError(new ToolValidationRetryFailed({ reason: "no node" })).headers).toBeUndefined()
  })
})
