import { describe, expect, it } from "@effect/vitest"
import type { ErrorObject } from "ajv"
import { FastCheck as fc } from "effect"
import { ToolValidationFailed } from "../../../src/chat/errors.js"
import { runSession } from "../../support/runSession.js"
import { parseJsonCalls } from "../../../src/chat/toolcalls/json.js"
import { makeLinearRegExpEngine } from "../../../src/chat/toolcalls/linearRegExp.js"
import { mistral } from "../../../src/chat/toolcalls/mistral.js"
import { qwen3Xml } from "../../../src/chat/toolcalls/qwen3Xml.js"
import type { ParsedToolCall, RequestTool, ToolChoiceMode } from "../../../src/chat/toolcalls/types.js"
import { describe as describeError, MAX_REASON_CHARS, validateToolCalls } from "../../../src/chat/toolcalls/validate.js"
import { clip, clipJoin, clipMarker, excerpt } from "../../../src/common/clip.js"
import { sseError } from "../../../src/dialects/chat-completions/render.js"
import { toHttpError } from "../../../src/dialects/openaiError.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import { sessionConfig } from "../../support/fixtures.js"

/** The bound the client contract names: a reason is at most 300 characters. */
const BOUND = 300
const bytes = (json: unknown) => Buffer.byteLength(JSON.stringify(json), "utf8")
const auto: ToolChoiceMode = { _tag: "Auto" }
const c = (name: string, args: unknown): ParsedToolCall => ({ name, arguments: JSON.stringify(args) })
const reasonOf = (calls: ReadonlyArray<ParsedToolCall>, tools: ReadonlyArray<RequestTool>, choice: ToolChoiceMode = auto) => {
  const verdict = validateToolCalls(calls, tools, choice)
  return verdict._tag === "Invalid" ? verdict.reason : "valid"
}
const MiB = 1024 * 1024

describe("clip", () => {
  it("keeps a short text, clips a long one to its start and a marker naming what was left off", () => {
    expect(clip("abc", 3)).toBe("abc")
    expect(clip("a".repeat(100), 20)).toBe("aaaaaaa…(+93 chars)")
    expect(clip("a".repeat(100), 20).length).toBeLessThanOrEqual(20)
    expect(clipMarker(93)).toBe("…(+93 chars)")
    expect(clip("abcdef", 3)).toBe("abc")
    expect(clipJoin(["a", "b", "c", "d"], "; ", 2, 100)).toBe("a; b; …(+2 more)")
    expect(excerpt(["c", "f"], 64)).toBe("[\"c\",\"f\"]")
    expect(excerpt(10n, 64)).toBe("10")
  })

  it.prop("any text and bound: at most the bound, the text itself when it fits, a prefix otherwise, no split pair", [
    fc.string({ unit: "binary", maxLength: 2000 }),
    fc.integer({ min: 0, max: 400 })
  ], ([text, max]) => {
    const out = clip(text, max)
    expect(out.length).toBeLessThanOrEqual(max)
    if (text.length <= max) expect(out).toBe(text)
    else {
      const kept = out.replace(/…\(\+\d+ chars\)$/, "")
      expect(text.startsWith(kept)).toBe(true)
      if (kept.length > 0) expect(kept).toBe(text.slice(0, kept.length))
      const last = kept.charCodeAt(kept.length - 1)
      if (kept.length < text.length && last >= 0xd800 && last <= 0xdbff) {
        expect(text.charCodeAt(kept.length) >= 0xdc00 && text.charCodeAt(kept.length) <= 0xdfff).toBe(false)
      }
    }
  })

  it.prop("clipJoin: any parts, count and bound → at most the bound", [
    fc.array(fc.string({ maxLength: 500 }), { maxLength: 50 }),
    fc.integer({ min: 0, max: 10 }),
    fc.integer({ min: 0, max: 400 })
  ], ([parts, count, max]) => {
    expect(clipJoin(parts, "; ", count, max).length).toBeLessThanOrEqual(max)
  })
})

describe("strict validation reasons are bounded", () => {
  // A 3.8 MiB request: one tool whose parameters hold a huge enum, and arguments that are not in it.
  const values = Array.from({ length: 190_000 }, (_, i) => `value-${String(i).padStart(12, "0")}`)
  const huge: RequestTool = {
    name: "pick",
    parameters: { type: "object", properties: { v: { enum: values } }, required: ["v"] }
  }

  it("a 3.8 MiB strict request with a huge enum: the reason ≤ 300 chars, the error body and SSE frame < 2 KiB", () => {
    expect(JSON.stringify(huge.parameters).length).toBeGreaterThan(3.8 * MiB)
    const reason = reasonOf([c("pick", { v: "not-in-it" })], [huge])
    expect(reason.startsWith("tool \"pick\": /v must be equal to one of the allowed values: [\"value-000")).toBe(true)
    expect(reason).toMatch(/ \(enum\)$/)
    expect(reason.length).toBeLessThanOrEqual(BOUND)
    expect(MAX_REASON_CHARS).toBe(BOUND)

    const error = new ToolValidationFailed({ reason })
    const http = toHttpError(error)
    expect(http).toMatchObject({ status: 502, body: { error: { type: "tool_validation_error", message: reason } } })
    expect(bytes(http.body)).toBeLessThan(2048)
    const frame = sseError(error)
    expect(frame).toEqual({ error: { type: "tool_validation_error", message: reason } })
    expect(bytes(frame)).toBeLessThan(2048)
  })

  it("the strict session fails the call with that bounded reason (the message logged and replayed)", () => {
    const out = runSession(sessionConfig({ tools: [huge], policy: { strict: true } }), [
      RunEvent.complete({ finishReason: "tool_calls", toolCalls: [c("pick", { v: "nope" })], metadata: {} })
    ])
    const last = out[out.length - 1]
    expect(last).toMatchObject({ _tag: "Error", error: { _tag: "ToolValidationFailed" } })
    expect(last?._tag === "Error" && last.error.message.length).toBeLessThanOrEqual(BOUND)
  })

  it("never quotes a whole const, pattern, property name, tool name or pointer", () => {
    // Within the arguments validated (MAX_VALIDATED_ARGUMENT_BYTES).
    const big = "x".repeat(256 * 1024)
    const cases: ReadonlyArray<readonly [ReadonlyArray<ParsedToolCall>, RequestTool, string]> = [
      [[c("t", { v: 1 })], { name: "t", parameters: { properties: { v: { const: big } } } }, "(const)"],
      [[c("t", { v: "b" })], { name: "t", parameters: { properties: { v: { pattern: `^a${big}$` } } } }, "(pattern)"],
      [[c("t", { [big]: 1 })], { name: "t", parameters: { additionalProperties: false } }, "(additionalProperties)"],
      [[c("t", { [big]: "s" })], { name: "t", parameters: { additionalProperties: { type: "integer" } } }, "(type)"],
      [[c(big, {})], { name: "t" }, "is not one of the request's tools"],
      [[c(big, {})], { name: big, parameters: { required: [big] } }, "(required)"],
      [[{ name: "t", arguments: `{"a": ${big}` }], { name: "t" }, "arguments are not valid JSON"],
      [[c("t", {})], { name: "t", parameters: { properties: { s: { pattern: `(?<=a)${big}` } } } }, "linear time"],
      [[c("t", {})], { name: "t", parameters: { type: big } }, "schema is invalid"]
    ]
    for (const [calls, tool, expected] of cases) {
      const reason = reasonOf(calls, [tool])
      expect(reason).toContain(expected)
      expect(reason.length).toBeLessThanOrEqual(BOUND)
    }
    const choices: ReadonlyArray<ToolChoiceMode> = [{ _tag: "None" }, { _tag: "Function", name: big }]
    for (const choice of choices) expect(reasonOf([c(big, {})], [], choice).length).toBeLessThanOrEqual(BOUND)
    expect(reasonOf([], [], { _tag: "Function", name: big }).length).toBeLessThanOrEqual(BOUND)
  })

  it("patterns RE2 rejects are reported clipped, however many and however long", () => {
    const engine = makeLinearRegExpEngine()
    engine.engine(`(?<=a)${"b".repeat(MiB)}`, "u")
    const [rejected] = engine.takeRejected()
    expect(rejected).toContain("cannot be matched in linear time")
    expect(rejected?.length).toBeLessThan(400)
    const properties = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`p${i}`, { pattern: `(?<=${i})x` }]))
    const reason = reasonOf([c("t", {})], [{ name: "t", parameters: { properties } }])
    expect(reason).toContain("cannot be matched in linear time")
    expect(reason.length).toBeLessThanOrEqual(BOUND)
  })

  const field = fc.string({ unit: "binary", maxLength: 3000, size: "large" })
  const anything = fc.oneof(fc.jsonValue(), field.map((s) => [s, s, s]))

  it.prop("any ajv error → a description within the bound", [
    fc.record({ instancePath: field, keyword: field, message: fc.option(field, { nil: undefined }) }),
    fc.dictionary(fc.constantFrom("allowedValues", "additionalProperty", "allowedValue", "pattern"), anything)
  ], ([e, params]) => {
    const error: ErrorObject = { instancePath: e.instancePath, schemaPath: "#", keyword: e.keyword, params, ...(e.message === undefined ? {} : { message: e.message }) }
    for (const keyword of [e.keyword, "enum", "additionalProperties"]) {
      expect(describeError({ ...error, keyword }).length).toBeLessThanOrEqual(BOUND)
    }
  })

  it.prop("any tool name, enum, arguments and tool_choice → a reason within the bound", [
    field,
    fc.array(anything, { minLength: 1, maxLength: 20 }),
    fc.dictionary(field, anything, { maxKeys: 5 }),
    fc.constantFrom<ToolChoiceMode>({ _tag: "Auto" }, { _tag: "None" }, { _tag: "Required" }),
    fc.boolean()
  ], ([name, values, args, choice, closed]) => {
    const tool: RequestTool = {
      name,
      parameters: { type: "object", properties: { v: { enum: values } }, required: ["v"], additionalProperties: !closed }
    }
    const calls = [c(name, args), c(`${name}x`, args)]
    expect(reasonOf(calls, [tool], choice).length).toBeLessThanOrEqual(BOUND)
    expect(reasonOf(calls.slice(0, 1), [tool], { _tag: "Function", name }).length).toBeLessThanOrEqual(BOUND)
  }, { fastCheck: { numRuns: 60 } })
})

describe("malformed markup reasons are bounded", () => {
  const big = "n".repeat(MiB)

  it("each parser clips what it quotes from the response", () => {
    const reasons = [
      mistral.parse(`${big}[ARGS]{broken`, true, []),
      mistral.parse(`${big}[ARGS][1]`, true, []),
      qwen3Xml.parse(`<function=${big}><parameter=a>1`, false, []),
      parseJsonCalls(`{"name": "${big}", "arguments": 1}`, "<tool_call>"),
      parseJsonCalls(`{"name": "a", "arguments": {"${big}`, "<tool_call>")
    ]
    for (const r of reasons) {
      expect(r._tag).toBe("Malformed")
      expect(r._tag === "Malformed" && r.reason.length).toBeLessThan(BOUND)
    }
  })

  it("many malformed blocks: one reason, its text and the count of reasons clipped", () => {
    const block = `<tool_call>{"name": "${"w".repeat(10_000)}", "arguments": {broken</tool_call>`
    const out = runSession(sessionConfig({ tools: [{ name: "get_weather" }] }), [
      ...Array.from({ length: 1000 }, () => RunEvent.delta(block)),
      RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })
    ])
    const last = out[out.length - 1]
    expect(last).toMatchObject({ _tag: "Error", error: { _tag: "ToolValidationFailed" } })
    const message = last?._tag === "Error" ? last.error.message : ""
    expect(message.startsWith("malformed tool call markup: <tool_call>: invalid JSON (")).toBe(true)
    expect(message.length).toBeLessThanOrEqual(BOUND)
    expect(bytes(toHttpError(new ToolValidationFailed({ reason: message })).body)).toBeLessThan(2048)
  })
})
