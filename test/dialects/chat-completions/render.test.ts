import { describe, expect, it } from "@effect/vitest"
import { RunFailed, UpstreamRejected } from "../../../src/chat/errors.js"
import { chunkRenderer, completion, sseError } from "../../../src/dialects/chat-completions/render.js"

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

describe("logprobs", () => {
  const ctx = { id: "chatcmpl-1", created: 1, model: "m", reasoningField: "reasoning_content", includeUsage: false } as const
  const hello = { token: "Hello", logprob: -0.5, bytes: [72, 101, 108, 108, 111], topLogprobs: [{ token: "Hi", logprob: -2 }] }
  const world = { token: " world", logprob: -0.25, chars: 6 }
  const wire = {
    hello: { token: "Hello", logprob: -0.5, bytes: [72, 101, 108, 108, 111], top_logprobs: [{ token: "Hi", logprob: -2, bytes: null }] },
    world: { token: " world", logprob: -0.25, bytes: null, top_logprobs: [] }
  }
  const frames = (sse: string): ReadonlyArray<unknown> =>
    sse.split("\n\n").filter((f) => f.startsWith("data: {")).map((f) => JSON.parse(f.slice("data: ".length)))

  it("a content chunk with entries carries them in OpenAI's shape; one without says null", () => {
    const render = chunkRenderer(ctx)
    const [withEntries, without] = frames(render.batch([
      { _tag: "Content", text: "Hello", logprobs: [hello, world] },
      { _tag: "Content", text: "!" }
    ]))
    expect(withEntries).toMatchObject({
      choices: [{
        index: 0,
        delta: { content: "Hello" },
        logprobs: { content: [wire.hello, wire.world], refusal: null },
        finish_reason: null
      }]
    })
    expect(without).toMatchObject({ choices: [{ delta: { content: "!" }, logprobs: null }] })
  })

  it("non-stream: every released entry, in order, when the request asked; null when it did not", () => {
    const emissions = [
      { _tag: "Content", text: "Hello", logprobs: [hello] },
      { _tag: "Reasoning", text: "r" },
      { _tag: "Content", text: " world", logprobs: [world] },
      { _tag: "Finish", finishReason: "stop", usage: undefined }
    ] as const
    const asked = completion({ ...ctx, logprobs: true }, emissions)
    expect(asked._tag === "Body" ? asked.body : undefined).toMatchObject({
      choices: [{ message: { content: "Hello world" }, logprobs: { content: [wire.hello, wire.world], refusal: null } }]
    })
    const none = completion({ ...ctx, logprobs: true }, [{ _tag: "Finish", finishReason: "stop", usage: undefined }])
    expect(none._tag === "Body" ? none.body : undefined).toMatchObject({ choices: [{ logprobs: { content: [], refusal: null } }] })
    const notAsked = completion(ctx, emissions)
    expect(notAsked._tag === "Body" ? notAsked.body : undefined).toMatchObject({ choices: [{ logprobs: null }] })
  })
})
