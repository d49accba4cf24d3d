import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Schema from "effect/Schema"
import { RunFailed, RunTimedOut, ToolValidationFailed, UpstreamRejected } from "../../../src/chat/errors.js"
import type { Emission } from "../../../src/chat/session.js"
import { ChatCompletion, type ChatCompletionChunk, ChatCompletionChunk as ChunkSchema } from "../../../src/dialects/chat-completions/completion.js"
import { chunkBuilder, chunkRenderer, completion, sseError } from "../../../src/dialects/chat-completions/render.js"

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

describe("typed chunks and the SSE text: one rendering", () => {
  const text = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ unit: "binary", maxLength: 6 }))
  const logprob = fc.record({
    token: text,
    logprob: fc.double({ noNaN: true, noDefaultInfinity: true, max: 0 }),
    bytes: fc.option(fc.array(fc.nat(255), { maxLength: 4 }), { nil: undefined }),
    topLogprobs: fc.option(fc.array(fc.record({ token: text, logprob: fc.double({ noNaN: true, noDefaultInfinity: true, max: 0 }) })), { nil: undefined })
  }, { requiredKeys: ["token", "logprob"] })
  const call = fc.record({ id: fc.string({ minLength: 1, maxLength: 8 }), name: fc.string({ minLength: 1, maxLength: 8 }), arguments: text })
  const output: fc.Arbitrary<Emission> = fc.oneof(
    text.map((t): Emission => ({ _tag: "Content", text: t })),
    fc.tuple(text, fc.array(logprob, { minLength: 1, maxLength: 3 })).map(([t, logprobs]): Emission => ({ _tag: "Content", text: t, logprobs })),
    text.map((t): Emission => ({ _tag: "Reasoning", text: t })),
    fc.array(call, { minLength: 1, maxLength: 3 }).map((calls): Emission => ({ _tag: "ToolCalls", calls }))
  )
  const usage = fc.option(
    fc.record({ inputTokens: fc.nat(), outputTokens: fc.nat(), cachedInputTokens: fc.nat(), reasoningTokens: fc.nat() }, {
      requiredKeys: ["inputTokens", "outputTokens"]
    }),
    { nil: undefined }
  )
  const terminal: fc.Arbitrary<Emission> = fc.oneof(
    fc.record({ _tag: fc.constant("Finish" as const), finishReason: fc.constantFrom("stop", "length", "tool_calls"), usage }),
    fc.constantFrom(new RunFailed({ reason: "node disconnected" }), new RunTimedOut({ bound: "idle", ms: 5 }), new ToolValidationFailed({ reason: "x" }))
      .map((error): Emission => ({ _tag: "Error", error }))
  )
  const context = fc.record({
    id: text,
    created: fc.nat(),
    model: text,
    reasoningField: fc.constantFrom("reasoning_content" as const, "reasoning" as const, "both" as const),
    includeUsage: fc.boolean(),
    logprobs: fc.boolean()
  })
  const frame = (c: ChatCompletionChunk) => `data: ${JSON.stringify(c)}\n\n`
  const decodeChunk = Schema.decodeUnknownSync(ChunkSchema)

  it.prop(
    "the SSE text is the typed chunks serialised, byte for byte; each decodes as a ChatCompletionChunk; the completion decodes",
    [context, fc.array(output, { maxLength: 12 }), terminal],
    ([ctx, outputs, end]) => {
      const all = [...outputs, end]
      const typed = chunkBuilder(ctx)
      const chunks = [...typed.head]
      for (const e of all) if (e._tag !== "Error") typed.emission(e, chunks)
      const sse = chunkRenderer(ctx)
      const closing = end._tag === "Error" ? `data: ${JSON.stringify(sseError(end.error))}\n\n` : ""
      expect(sse.head + sse.batch(all)).toBe(chunks.map(frame).join("") + closing + "data: [DONE]\n\n")
      const wire = (value: unknown): unknown => JSON.parse(JSON.stringify(value))
      for (const c of chunks) expect(decodeChunk(wire(c))).toEqual(wire(c))
      const body = completion(ctx, all)
      if (body._tag === "Body") expect(Schema.decodeUnknownSync(ChatCompletion)(wire(body.body))).toEqual(wire(body.body))
      else expect(end._tag).toBe("Error")
    }
  )
})
