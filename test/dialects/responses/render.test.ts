import { ResponseStreamEvent } from "@effect/ai-openai/OpenAiClient"
import * as Generated from "@effect/ai-openai/Generated"
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { accumulateResponse } from "openai/lib/responses/ResponseAccumulator"
import type { Response as SdkResponse, ResponseStreamEvent as SdkEvent } from "openai/resources/responses/responses"
import {
  type RunOutcomeError,
  RunFailed,
  RunTimedOut,
  ToolValidationFailed,
  ToolValidationRetryFailed,
  UpstreamRejected
} from "../../../src/chat/errors.js"
import type { Emission } from "../../../src/chat/session.js"
import { echoOf } from "../../../src/dialects/responses/Responses.js"
import { decodeBody } from "../../../src/dialects/responses/request.js"
import {
  eventRenderer,
  failedError,
  type ResponseContext,
  responseBody
} from "../../../src/dialects/responses/render.js"

/** The Responses renderer over arbitrary emission sequences, split into arbitrary batches. */

const wire = Either.getOrThrow(decodeBody(JSON.stringify({
  model: "caller-model",
  input: "hi",
  instructions: "be brief",
  tools: [{ type: "function", name: "get_weather", parameters: { type: "object" } }, { type: "web_search" }],
  metadata: { k: "v" }
})))
const ctx: ResponseContext = { id: "resp_abc", suffix: "abc", created: 1_700_000_000, echo: echoOf(wire) }

interface Frame {
  readonly event: string
  readonly data: Record<string, unknown>
  readonly raw: string
}

const framesOf = (text: string): Array<Frame> => {
  expect(text.endsWith("\n\n")).toBe(true)
  return text.slice(0, -2).split("\n\n").map((block) => {
    const match = /^event: ([a-z_.]+)\ndata: (.*)$/s.exec(block)
    expect(match, block.slice(0, 200)).not.toBeNull()
    const raw = match?.[2] ?? ""
    return { event: match?.[1] ?? "", data: JSON.parse(raw), raw }
  })
}

const render = (batches: ReadonlyArray<ReadonlyArray<Emission>>): string => {
  const r = eventRenderer(ctx)
  return r.head + batches.map(r.batch).join("")
}

const TERMINALS = new Set(["response.completed", "response.incomplete", "response.failed"])

// ---------------------------------------------------------------------------
// arbitraries

const text = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ unit: "binary", maxLength: 6 }), fc.constantFrom("\n", "\"", "</s>", "é"))
const jsonArgs = fc.dictionary(fc.string({ maxLength: 5 }), fc.oneof(fc.integer(), fc.string({ maxLength: 5 }))).map((o) => JSON.stringify(o))
const call = fc.record({
  id: fc.string({ minLength: 1, maxLength: 8 }).map((s) => `call_${s}`),
  name: fc.string({ minLength: 1, maxLength: 8 }),
  arguments: fc.oneof(jsonArgs, fc.string({ maxLength: 10 }))
})
const usage = fc.option(
  fc.record({
    inputTokens: fc.nat(1000),
    outputTokens: fc.nat(1000),
    reasoningTokens: fc.option(fc.nat(100), { nil: undefined }),
    cachedInputTokens: fc.option(fc.nat(100), { nil: undefined })
  }, { requiredKeys: ["inputTokens", "outputTokens"] }),
  { nil: undefined }
)
const runError: fc.Arbitrary<RunOutcomeError> = fc.oneof(
  fc.constant(new RunFailed({ reason: "node disconnected" })),
  fc.constant(new RunTimedOut({ bound: "idle", ms: 5 })),
  fc.constant(new ToolValidationFailed({ reason: "bad args" })),
  fc.constant(new ToolValidationRetryFailed({ reason: "no node" })),
  fc.constantFrom(400, 413, 429, 401, 404).map((status) =>
    new UpstreamRejected({ status, code: status === 400 ? "context_length_exceeded" : null, message: "no", retryAfter: null }))
)
const terminal: fc.Arbitrary<Emission> = fc.oneof(
  fc.record({ finishReason: fc.constantFrom("stop", "length", "tool_calls", "content_filter"), usage }).map((f): Emission => ({
    _tag: "Finish",
    finishReason: f.finishReason,
    usage: f.usage
  })),
  runError.map((error): Emission => ({ _tag: "Error", error }))
)
const textEmission: fc.Arbitrary<Emission> = fc.oneof(
  text.map((t): Emission => ({ _tag: "Content", text: t })),
  text.map((t): Emission => ({ _tag: "Reasoning", text: t }))
)
/** What a session emits: text in any order, maybe tool calls, one terminal. */
const emissions: fc.Arbitrary<ReadonlyArray<Emission>> = fc.tuple(
  fc.array(textEmission, { maxLength: 12 }),
  fc.option(fc.array(call, { minLength: 1, maxLength: 3 }), { nil: undefined }),
  terminal
).map(([texts, calls, end]) => [...texts, ...(calls === undefined ? [] : [{ _tag: "ToolCalls", calls } as const]), end])

/** The emissions cut into batches at arbitrary points. */
const batched = emissions.chain((es) =>
  fc.array(fc.boolean(), { minLength: es.length, maxLength: es.length }).map((cuts) => {
    const batches: Array<Array<Emission>> = [[]]
    es.forEach((e, i) => {
      batches[batches.length - 1]?.push(e)
      if (cuts[i] === true && i < es.length - 1) batches.push([])
    })
    return { es, batches }
  })
)

const contentOf = (es: ReadonlyArray<Emission>, tag: "Content" | "Reasoning") =>
  es.flatMap((e) => (e._tag === tag ? [e.text] : [])).join("")
const callsOf = (es: ReadonlyArray<Emission>) => es.flatMap((e) => (e._tag === "ToolCalls" ? e.calls : []))

const decodeEvent = Schema.decodeUnknownEither(ResponseStreamEvent)
const decodeResponse = Schema.decodeUnknownEither(Generated.Response)
/** Codes outside OpenAI's list: @effect/ai-openai's schema does not take them (it skips such an event). */
const OWN_CODES = new Set(["tool_validation_error", "tool_validation_retry_error", "context_length_exceeded", "request_too_large"])

describe("Responses event renderer (properties)", () => {
  it.prop("a response being stored (hold): the same frames, a finished one's terminal event only on release, saying whether it was stored", [batched], ([{ es, batches }]) => {
    const whole = render(batches)
    const finished = es[es.length - 1]?._tag === "Finish"
    const held = eventRenderer({ ...ctx, hold: true })
    const before = held.head + batches.map(held.batch).join("")
    // A failed response's event is not held (a client that stopped reading gets it at once).
    expect(framesOf(before).some((f) => TERMINALS.has(f.event))).toBe(!finished)
    expect(held.final()).toBeDefined()
    const tail = held.release(true)
    expect(tail === "").toBe(!finished)
    expect(before + tail).toBe(whole)
    expect(held.release(true)).toBe("")
    // A store that failed: the same event, its response saying store: false.
    const failed = eventRenderer({ ...ctx, hold: true, echo: { ...ctx.echo, store: true } })
    for (const b of batches) failed.batch(b)
    const released = failed.release(false)
    if (finished) expect((framesOf(released)[0]?.data["response"] as { store?: unknown } | undefined)?.store).toBe(false)
  })

  it.prop("sequence numbers count from 0; the head is created + in_progress; exactly one terminal, last", [batched], ([{ batches }]) => {
    const frames = framesOf(render(batches))
    frames.forEach((f, i) => {
      expect(f.data["sequence_number"]).toBe(i)
      expect(f.data["type"]).toBe(f.event)
      expect(f.raw.startsWith(`{"type":"${f.event}","sequence_number":${i}`)).toBe(true)
    })
    expect(frames[0]?.event).toBe("response.created")
    expect(frames[1]?.event).toBe("response.in_progress")
    expect(frames.filter((f) => TERMINALS.has(f.event)).length).toBe(1)
    expect(TERMINALS.has(frames[frames.length - 1]?.event ?? "")).toBe(true)
  })

  it.prop("every item and part opened is closed, in order, before the terminal; output_index consecutive", [batched], ([{ batches }]) => {
    const frames = framesOf(render(batches))
    let open: number | undefined
    let openPart = false
    let next = 0
    const done: Array<unknown> = []
    for (const f of frames) {
      const index = f.data["output_index"]
      switch (f.event) {
        case "response.output_item.added":
          expect(open).toBeUndefined()
          expect(index).toBe(next)
          open = next++
          break
        case "response.content_part.added":
        case "response.reasoning_summary_part.added":
          expect(index).toBe(open)
          expect(openPart).toBe(false)
          expect(f.data["content_index"] ?? f.data["summary_index"]).toBe(0)
          openPart = true
          break
        case "response.content_part.done":
        case "response.reasoning_summary_part.done":
          expect(openPart).toBe(true)
          openPart = false
          break
        case "response.output_item.done":
          expect(index).toBe(open)
          expect(openPart).toBe(false)
          done.push(f.data["item"])
          open = undefined
          break
        case "response.output_text.delta":
        case "response.reasoning_summary_text.delta":
        case "response.function_call_arguments.delta":
          expect(index).toBe(open)
          break
      }
    }
    expect(open).toBeUndefined()
    const last = frames[frames.length - 1]?.data["response"]
    expect(last).toMatchObject({ output: done })
  })

  it.prop("the deltas join to the content and the reasoning; arguments at done are the calls'", [batched], ([{ es, batches }]) => {
    const frames = framesOf(render(batches))
    const joined = (event: string) => frames.filter((f) => f.event === event).map((f) => f.data["delta"]).join("")
    expect(joined("response.output_text.delta")).toBe(contentOf(es, "Content"))
    expect(joined("response.reasoning_summary_text.delta")).toBe(contentOf(es, "Reasoning"))
    const calls = callsOf(es)
    const argsDone = frames.filter((f) => f.event === "response.function_call_arguments.done")
    expect(argsDone.map((f) => [f.data["name"], f.data["arguments"]])).toEqual(calls.map((c) => [c.name, c.arguments]))
    for (const [i, c] of calls.entries()) {
      const parses = (s: unknown) => typeof s === "string" && Either.isRight(Either.try(() => JSON.parse(s)))
      if (parses(c.arguments)) expect(parses(argsDone[i]?.data["arguments"])).toBe(true)
    }
    const items = frames.filter((f) => f.event === "response.output_item.done").map((f) => f.data["item"])
    const fcs = items.filter((i) => typeof i === "object" && i !== null && "call_id" in i)
    expect(fcs).toEqual(calls.map((c) => expect.objectContaining({ call_id: c.id, name: c.name, arguments: c.arguments, type: "function_call" })))
  })

  it.prop("the terminal says what ended the response, with usage on completion", [batched], ([{ es }]) => {
    const end = es[es.length - 1]
    const frames = framesOf(render([es]))
    const last = frames[frames.length - 1]
    const response = last?.data["response"]
    if (end?._tag === "Finish") {
      const incomplete = end.finishReason === "length" || end.finishReason === "content_filter"
      expect(last?.event).toBe(incomplete ? "response.incomplete" : "response.completed")
      expect(response).toMatchObject({
        status: incomplete ? "incomplete" : "completed",
        incomplete_details: incomplete ? { reason: end.finishReason === "length" ? "max_output_tokens" : "content_filter" } : null,
        // None reported: zeros (the AI SDK's stream schema requires the object).
        usage: end.usage === undefined ? { input_tokens: 0, output_tokens: 0, total_tokens: 0, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } } : {
          input_tokens: end.usage.inputTokens,
          output_tokens: end.usage.outputTokens,
          total_tokens: end.usage.inputTokens + end.usage.outputTokens,
          input_tokens_details: { cached_tokens: end.usage.cachedInputTokens ?? 0 },
          output_tokens_details: { reasoning_tokens: end.usage.reasoningTokens ?? 0 }
        }
      })
    } else if (end?._tag === "Error") {
      expect(last?.event).toBe("response.failed")
      expect(response).toMatchObject({ status: "failed", error: failedError(end.error), usage: null })
    }
  })

  it.prop("the same text whatever the batches; nothing after the terminal", [batched, fc.array(textEmission, { maxLength: 3 })], ([{ es, batches }, after]) => {
    const whole = render([es])
    expect(render(batches)).toBe(whole)
    expect(render([...batches, [...after, { _tag: "Finish", finishReason: "stop", usage: undefined }]])).toBe(whole)
  })

  it.prop("the non-stream body is the terminal's response; a failed run is the run's error", [emissions], ([es]) => {
    const frames = framesOf(render([es]))
    const response = frames[frames.length - 1]?.data["response"]
    const body = responseBody(ctx, es)
    const end = es[es.length - 1]
    if (end?._tag === "Error") expect(body).toEqual({ _tag: "Error", error: end.error })
    else expect(body).toEqual({ _tag: "Body", body: response })
  })

  it.prop("every frame decodes with @effect/ai-openai's event schema, and the openai SDK's accumulator rebuilds the response", [emissions], ([es]) => {
    const frames = framesOf(render([es]))
    let snapshot: SdkResponse | undefined
    for (const f of frames) {
      const event: SdkEvent = JSON.parse(f.raw)
      const own = event.type === "response.failed" && OWN_CODES.has(event.response.error?.code ?? "")
      if (!own) expect(Either.isRight(decodeEvent(f.data)), f.raw.slice(0, 300)).toBe(true)
      snapshot = accumulateResponse(event, snapshot)
    }
    expect(snapshot).toMatchObject(frames[frames.length - 1]?.data["response"] ?? {})
    const body = responseBody(ctx, es)
    if (body._tag === "Body") expect(Either.isRight(decodeResponse(body.body))).toBe(true)
  })
})

describe("Responses event renderer (examples)", () => {
  it("reasoning, then text, then a call: three items, each closed before the next opens", () => {
    const frames = framesOf(render([
      [{ _tag: "Reasoning", text: "think" }],
      [{ _tag: "Content", text: "Hel" }, { _tag: "Content", text: "lo" }],
      [{ _tag: "ToolCalls", calls: [{ id: "call_1", name: "get_weather", arguments: "{\"city\":\"Oslo\"}" }] }, {
        _tag: "Finish",
        finishReason: "tool_calls",
        usage: { inputTokens: 3, outputTokens: 4 }
      }]
    ]))
    expect(frames.map((f) => f.event)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.reasoning_summary_part.added",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.done",
      "response.reasoning_summary_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed"
    ])
    expect(frames[0]?.data["response"]).toMatchObject({
      id: "resp_abc",
      object: "response",
      created_at: 1_700_000_000,
      status: "in_progress",
      model: "caller-model",
      output: [],
      usage: null,
      instructions: "be brief",
      metadata: { k: "v" },
      tool_choice: "auto",
      parallel_tool_calls: true,
      store: false,
      // The function tools only: the web_search tool is not run.
      tools: [{ type: "function", name: "get_weather", description: null, parameters: { type: "object" }, strict: null }]
    })
    expect(frames[frames.length - 1]?.data["response"]).toMatchObject({
      status: "completed",
      output: [
        { id: "rs_abc_0", type: "reasoning", summary: [{ type: "summary_text", text: "think" }] },
        {
          id: "msg_abc_1",
          type: "message",
          status: "completed",
          role: "assistant",
          content: [{ type: "output_text", text: "Hello", annotations: [] }]
        },
        { id: "fc_abc_2", type: "function_call", status: "completed", call_id: "call_1", name: "get_weather", arguments: "{\"city\":\"Oslo\"}" }
      ],
      usage: { input_tokens: 3, output_tokens: 4, total_tokens: 7 }
    })
  })

  it("a length finish is response.incomplete, its open message incomplete", () => {
    const frames = framesOf(render([[{ _tag: "Content", text: "abc" }, { _tag: "Finish", finishReason: "length", usage: undefined }]]))
    const last = frames[frames.length - 1]
    expect(last?.event).toBe("response.incomplete")
    expect(last?.data["response"]).toMatchObject({
      status: "incomplete",
      incomplete_details: { reason: "max_output_tokens" },
      output: [{ type: "message", status: "incomplete" }]
    })
  })

  it("no [DONE], no data-only frames", () => {
    const text = render([[{ _tag: "Content", text: "x" }, { _tag: "Finish", finishReason: "stop", usage: undefined }]])
    expect(text).not.toContain("[DONE]")
    expect(text.split("\n\n").filter((b) => b !== "").every((b) => b.startsWith("event: "))).toBe(true)
  })

  it("failed codes: OpenAI's where one fits, the edge's own for tool validation", () => {
    const rejected = (status: number, code: string | null) => new UpstreamRejected({ status, code, message: "m", retryAfter: null })
    expect(failedError(new RunFailed({ reason: "node gone" }))).toEqual({ code: "server_error", message: "node gone" })
    expect(failedError(new RunTimedOut({ bound: "idle", ms: 1 }))).toEqual({ code: "server_error", message: "run timed out" })
    expect(failedError(new ToolValidationFailed({ reason: "r" }))).toEqual({ code: "tool_validation_error", message: "r" })
    expect(failedError(new ToolValidationRetryFailed({ reason: "r" })).code).toBe("tool_validation_retry_error")
    expect(failedError(rejected(429, null)).code).toBe("rate_limit_exceeded")
    expect(failedError(rejected(400, "context_length_exceeded")).code).toBe("context_length_exceeded")
    expect(failedError(rejected(400, null)).code).toBe("invalid_prompt")
    expect(failedError(rejected(401, "invalid_api_key"))).toEqual({ code: "server_error", message: "the upstream refused the edge's credentials" })
    expect(failedError(rejected(404, "x")).code).toBe("server_error")
  })
})
