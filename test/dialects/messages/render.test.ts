import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import {
  RunFailed,
  RunTimedOut,
  ToolValidationFailed,
  UpstreamRejected
} from "../../../src/chat/errors.js"
import type { Emission } from "../../../src/chat/session.js"
import type { ToolCall } from "../../../src/chat/toolcalls/types.js"
import {
  anthropicUsage,
  message,
  RAW_ARGUMENTS_KEY,
  stopReason,
  streamRenderer,
  toolInput,
  toolUseId
} from "../../../src/dialects/messages/render.js"
import { field, parseEvents, type SseEvent } from "./sse.js"

const ctx = { id: "msg_1", model: "claude-sonnet-4-5" }

const text = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ unit: "binary", maxLength: 6 }))

const args = fc.oneof(
  fc.object({ maxDepth: 2 }).map((o) => JSON.stringify(o)),
  fc.json({ maxDepth: 2 }),
  fc.string({ maxLength: 10 })
)

const call: fc.Arbitrary<ToolCall> = fc.record({
  id: fc.oneof(fc.stringMatching(/^call_[A-Za-z0-9]{4}$/), fc.string({ minLength: 1, maxLength: 8 })),
  name: fc.string({ minLength: 1, maxLength: 8 }),
  arguments: args
})

const outcome = fc.constantFrom(
  new RunFailed({ reason: "node disconnected" }),
  new RunTimedOut({ bound: "idle", ms: 1000 }),
  new ToolValidationFailed({ reason: "get_weather: city must be a string" }),
  new UpstreamRejected({ status: 400, code: "context_length_exceeded", message: "too long", retryAfter: null }),
  new UpstreamRejected({ status: 429, code: null, message: "slow down", retryAfter: 2 })
)

const usage = fc.option(
  fc.record(
    { inputTokens: fc.nat(5000), outputTokens: fc.nat(5000), cachedInputTokens: fc.nat(5000) },
    { requiredKeys: ["inputTokens", "outputTokens"] }
  ),
  { nil: undefined }
)

const terminal: fc.Arbitrary<Emission> = fc.oneof(
  fc.record({
    _tag: fc.constant("Finish" as const),
    finishReason: fc.constantFrom("stop", "length", "tool_calls", "content_filter", "stop_sequence", "eos"),
    usage
  }),
  fc.record({ _tag: fc.constant("Error" as const), error: outcome })
)

const textual: fc.Arbitrary<Emission> = fc.oneof(
  text.map((t): Emission => ({ _tag: "Content", text: t })),
  text.map((t): Emission => ({ _tag: "Reasoning", text: t }))
)

/** Text and reasoning in any order, maybe tool calls, one terminal, maybe stray emissions after it. */
const emissions = fc.tuple(
  fc.array(textual, { maxLength: 16 }),
  fc.option(fc.array(call, { minLength: 1, maxLength: 3 }), { nil: undefined }),
  terminal,
  fc.array(textual, { maxLength: 2 })
).map(([texts, calls, end, after]): ReadonlyArray<Emission> => [
  ...texts,
  ...(calls === undefined ? [] : [{ _tag: "ToolCalls" as const, calls }]),
  end,
  ...after
])

/** The emissions cut into batches at random points. */
const batched = emissions.chain((all) =>
  fc.array(fc.nat(all.length), { maxLength: 6 }).map((cuts) => {
    const points = [...new Set([0, ...cuts, all.length])].sort((a, b) => a - b)
    const batches: Array<ReadonlyArray<Emission>> = []
    for (let i = 1; i < points.length; i++) batches.push(all.slice(points[i - 1], points[i]))
    return { all, batches }
  })
)

const render = (batches: ReadonlyArray<ReadonlyArray<Emission>>): Array<SseEvent> => {
  const r = streamRenderer(ctx)
  return parseEvents(r.head + batches.map((b) => r.batch(b)).join(""))
}

/** The emissions up to and with the first terminal. */
const upToTerminal = (all: ReadonlyArray<Emission>): ReadonlyArray<Emission> => {
  const end = all.findIndex((e) => e._tag === "Finish" || e._tag === "Error")
  return all.slice(0, end + 1)
}

describe("Messages stream renderer: any emission sequence, in any batching, is a well-formed Anthropic stream", () => {
  it.prop("message_start and ping first; event names match data types; blocks opened and stopped in order, from 0", [batched], ([{ batches }]) => {
    const events = render(batches)
    expect(events[0]?.event).toBe("message_start")
    expect(field(events[0]?.data, "message", "id")).toBe("msg_1")
    expect(field(events[0]?.data, "message", "model")).toBe("claude-sonnet-4-5")
    expect(field(events[0]?.data, "message", "usage")).toEqual({ input_tokens: 0, output_tokens: 0 })
    expect(events[1]?.event).toBe("ping")
    let open: number | undefined
    let nextIndex = 0
    for (const e of events) {
      expect(e.data["type"]).toBe(e.event)
      if (e.event === "content_block_start") {
        expect(open).toBeUndefined()
        expect(e.data["index"]).toBe(nextIndex)
        open = nextIndex++
      } else if (e.event === "content_block_delta") {
        expect(e.data["index"]).toBe(open)
      } else if (e.event === "content_block_stop") {
        expect(e.data["index"]).toBe(open)
        open = undefined
      } else if (e.event === "message_delta" || e.event === "message_stop" || e.event === "error") {
        expect(open).toBeUndefined()
      }
    }
    expect(open).toBeUndefined()
  })

  it.prop("exactly one terminal (message_stop after one message_delta, or error), last; nothing after it", [batched], ([{ all, batches }]) => {
    const events = render(batches)
    const terminals = events.filter((e) => e.event === "message_stop" || e.event === "error")
    expect(terminals).toHaveLength(1)
    expect(events[events.length - 1]).toBe(terminals[0])
    const end = upToTerminal(all).at(-1)
    if (end?._tag === "Finish") {
      expect(events.filter((e) => e.event === "message_delta")).toHaveLength(1)
      expect(events[events.length - 2]?.event).toBe("message_delta")
      const delta = events[events.length - 2]?.data
      expect(field(delta, "delta", "stop_sequence")).toBeNull()
      expect(field(delta, "usage")).toEqual(anthropicUsage(end.usage))
    } else {
      expect(events[events.length - 1]?.event).toBe("error")
      expect(events.some((e) => e.event === "message_delta")).toBe(false)
    }
    // A batch after the terminal writes nothing.
    const r = streamRenderer(ctx)
    for (const b of batches) r.batch(b)
    expect(r.batch([{ _tag: "Content", text: "late" }])).toBe("")
  })

  it.prop("text and thinking deltas concatenate to the content and reasoning; tool_use inputs parse as the calls' inputs", [batched], ([{ all, batches }]) => {
    const events = render(batches)
    const kept = upToTerminal(all)
    const starts = events.filter((e) => e.event === "content_block_start")
    const kindOf = (index: unknown) => field(starts.find((s) => s.data["index"] === index)?.data, "content_block", "type")
    const deltas = events.filter((e) => e.event === "content_block_delta")
    const joined = (kind: string, key: string) =>
      deltas.filter((d) => field(d.data, "delta", "type") === kind).map((d) => String(field(d.data, "delta", key))).join("")
    expect(joined("text_delta", "text")).toBe(kept.map((e) => (e._tag === "Content" ? e.text : "")).join(""))
    expect(joined("thinking_delta", "thinking")).toBe(kept.map((e) => (e._tag === "Reasoning" ? e.text : "")).join(""))
    for (const d of deltas) {
      const kind = field(d.data, "delta", "type")
      expect(kind).toBe({ text: "text_delta", thinking: "thinking_delta", tool_use: "input_json_delta" }[String(kindOf(d.data["index"]))])
    }
    // No empty blocks: every text or thinking block has a delta.
    for (const s of starts) expect(deltas.some((d) => d.data["index"] === s.data["index"])).toBe(true)

    const calls = kept.flatMap((e) => (e._tag === "ToolCalls" ? e.calls : []))
    const uses = starts.filter((s) => field(s.data, "content_block", "type") === "tool_use")
    expect(uses).toHaveLength(calls.length)
    for (const [i, c] of calls.entries()) {
      const start = uses[i]
      expect(field(start?.data, "content_block")).toEqual({ type: "tool_use", id: toolUseId(c.id), name: c.name, input: {} })
      expect(String(field(start?.data, "content_block", "id"))).toMatch(/^[A-Za-z0-9_-]+$/)
      const json = deltas.filter((d) => d.data["index"] === start?.data["index"])
      expect(json).toHaveLength(1)
      const input: unknown = JSON.parse(String(field(json[0]?.data, "delta", "partial_json")))
      expect(input).toEqual(toolInput(c.arguments).value)
      expect(typeof input === "object" && input !== null && !Array.isArray(input)).toBe(true)
    }
    const end = kept.at(-1)
    if (end?._tag === "Finish") {
      const reason = field(events[events.length - 2]?.data, "delta", "stop_reason")
      expect(reason).toBe(calls.length > 0 ? "tool_use" : stopReason(end.finishReason, false))
    }
  })
})

describe("Messages stream renderer: cases", () => {
  it("a thinking block, then a text block, then a tool_use block, then message_delta and message_stop", () => {
    const r = streamRenderer(ctx)
    const out = r.head + r.batch([{ _tag: "Reasoning", text: "hmm" }, { _tag: "Content", text: "Hi" }]) + r.batch([
      { _tag: "ToolCalls", calls: [{ id: "call_1", name: "Bash", arguments: "{\"command\":\"ls\"}" }] },
      { _tag: "Finish", finishReason: "tool_calls", usage: { inputTokens: 10, outputTokens: 3, cachedInputTokens: 4 } }
    ])
    expect(parseEvents(out).map((e) => [e.event, e.data["index"] ?? null])).toEqual([
      ["message_start", null],
      ["ping", null],
      ["content_block_start", 0],
      ["content_block_delta", 0],
      ["content_block_stop", 0],
      ["content_block_start", 1],
      ["content_block_delta", 1],
      ["content_block_stop", 1],
      ["content_block_start", 2],
      ["content_block_delta", 2],
      ["content_block_stop", 2],
      ["message_delta", null],
      ["message_stop", null]
    ])
    expect(out).toContain(
      `event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}\n\n`
    )
    expect(out).toContain(
      `event: content_block_delta\ndata: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\\"command\\":\\"ls\\"}"}}\n\n`
    )
    expect(out).toContain(
      `event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":6,"output_tokens":3,"cache_read_input_tokens":4}}\n\n`
    )
    expect(out.endsWith(`event: message_stop\ndata: {"type":"message_stop"}\n\n`)).toBe(true)
  })

  it("an error after output closes the open block and ends with one error event, no message_stop", () => {
    const r = streamRenderer(ctx)
    const out = r.batch([{ _tag: "Content", text: "par" }, { _tag: "Error", error: new RunFailed({ reason: "node disconnected" }) }])
    const events = parseEvents(out)
    expect(events.map((e) => e.event)).toEqual(["content_block_start", "content_block_delta", "content_block_stop", "error"])
    expect(events[3]?.data).toEqual({ type: "error", error: { type: "api_error", message: "node disconnected" } })
  })

  it("stop reasons: length → max_tokens, stop → end_turn, calls → tool_use, tool_calls without a call → end_turn", () => {
    expect(stopReason("length", false)).toBe("max_tokens")
    expect(stopReason("stop", false)).toBe("end_turn")
    expect(stopReason("stop", true)).toBe("tool_use")
    expect(stopReason("tool_calls", false)).toBe("end_turn")
    expect(stopReason("content_filter", false)).toBe("refusal")
    expect(stopReason("stop_sequence", false)).toBe("stop_sequence")
  })

  it("tool arguments that are not a JSON object are wrapped whole under _raw_arguments; an object is passed as written", () => {
    expect(toolInput("{\"a\": 1}")).toEqual({ json: "{\"a\": 1}", value: { a: 1 } })
    for (const raw of ["[1,2]", "\"ls\"", "42", "null", "{\"a\":", "not json"]) {
      expect(toolInput(raw).value).toEqual({ [RAW_ARGUMENTS_KEY]: raw })
      expect(JSON.parse(toolInput(raw).json)).toEqual({ [RAW_ARGUMENTS_KEY]: raw })
    }
  })

  it("tool_use ids outside [A-Za-z0-9_-] are mapped into it", () => {
    expect(toolUseId("call_Ab-9")).toBe("call_Ab-9")
    expect(toolUseId("functions.get_weather:0")).toBe("functions_get_weather_0")
  })
})

describe("Messages non-stream body", () => {
  it("thinking, text and tool_use blocks in that order, with stop_reason, null stop_sequence and usage", () => {
    const rendered = message(ctx, [
      { _tag: "Content", text: "Let me look." },
      { _tag: "Reasoning", text: "the user wants ls" },
      { _tag: "ToolCalls", calls: [{ id: "call_1", name: "Bash", arguments: "{\"command\":\"ls\"}" }, { id: "c2", name: "x", arguments: "[1]" }] },
      { _tag: "Finish", finishReason: "tool_calls", usage: { inputTokens: 12, outputTokens: 5 } }
    ])
    expect(rendered).toEqual({
      _tag: "Body",
      body: {
        id: "msg_1",
        type: "message",
        role: "assistant",
        model: "claude-sonnet-4-5",
        content: [
          { type: "thinking", thinking: "the user wants ls", signature: "" },
          { type: "text", text: "Let me look." },
          { type: "tool_use", id: "call_1", name: "Bash", input: { command: "ls" } },
          { type: "tool_use", id: "c2", name: "x", input: { [RAW_ARGUMENTS_KEY]: "[1]" } }
        ],
        stop_reason: "tool_use",
        stop_sequence: null,
        usage: { input_tokens: 12, output_tokens: 5 }
      }
    })
  })

  it("an empty answer has one empty text block; max_tokens on length; no usage → zeros", () => {
    const rendered = message(ctx, [{ _tag: "Finish", finishReason: "length", usage: undefined }])
    expect(rendered._tag === "Body" ? rendered.body : undefined).toMatchObject({
      content: [{ type: "text", text: "" }],
      stop_reason: "max_tokens",
      usage: { input_tokens: 0, output_tokens: 0 }
    })
  })

  it("a terminal error is the answer's error", () => {
    const error = new RunTimedOut({ bound: "idle", ms: 5 })
    expect(message(ctx, [{ _tag: "Content", text: "x" }, { _tag: "Error", error }])).toEqual({ _tag: "Error", error })
  })
})
