import { FastCheck as fc } from "effect"
import { describe, expect, it } from "vitest"
import type { RequestTool } from "../../../src/chat/toolcalls/types.js"
import { validateToolCalls } from "../../../src/chat/toolcalls/validate.js"
import { jsonSchemaGrammar } from "../../../src/providers/constraints/jsonSchemaGbnf.js"
import { responseFormatGrammar, toolCallGrammar } from "../../../src/providers/constraints/toolCallGrammar.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import { sessionConfig } from "../../support/fixtures.js"
import { accepts, type Grammar, makeRandom, parseGbnf, sample } from "../../support/gbnf.js"
import { runSession } from "../../support/runSession.js"
import { splitAt } from "../../support/splits.js"

/** A JSON string inside a call never holds a raw `<`: no tag can appear inside a value and split the call. */

const parsed = (result: ReturnType<typeof toolCallGrammar>): Grammar => {
  if (result._tag !== "Grammar") throw new Error(result._tag)
  const p = parseGbnf(result.grammar)
  if (!p.ok) throw new Error(p.error)
  return p.grammar
}

const noteTool = (note: Readonly<Record<string, unknown>>): RequestTool => ({
  name: "send_note",
  parameters: { type: "object", properties: { note }, required: ["note"], additionalProperties: false }
})

const callGrammar = (tool: RequestTool) =>
  parsed(toolCallGrammar({ tools: [{ function: tool }], toolChoice: "required", parallelToolCalls: false }))

const call = (args: string) => `<tool_call>\n{"name": "send_note", "arguments": ${args}}\n</tool_call>`
const escaped = (json: string) => json.replace(/</g, "\\u003c")

/** The session's verdict on a whole answer (strict, the tool required): its calls' decoded arguments, or the error. */
const throughSession = (tool: RequestTool, text: string, cuts: ReadonlyArray<number> = []) => {
  const config = sessionConfig({ tools: [tool], toolChoice: { _tag: "Required" }, policy: { strict: true } })
  const inputs = [
    ...splitAt(text, cuts).map((part) => RunEvent.delta(part)),
    RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })
  ]
  const out = runSession(config, inputs)
  return {
    args: out.flatMap((e) => (e._tag === "ToolCalls" ? e.calls.map((c) => JSON.parse(c.arguments) as unknown) : [])),
    error: out.flatMap((e) => (e._tag === "Error" ? [e.error._tag] : []))
  }
}

describe("strings inside a call write < escaped", () => {
  it("a raw < is refused inside a call, its escape (either case) taken; outside markup < stays raw", () => {
    const g = callGrammar(noteTool({ type: "string" }))
    expect(accepts(g, call("{\"note\": \"a \\u003ctool_call> b\"}"))).toBe(true)
    expect(accepts(g, call("{\"note\": \"\\u003C/tool_call>\"}"))).toBe(true)
    expect(accepts(g, call("{\"note\": \"a <b\"}"))).toBe(false)
    expect(accepts(g, call("{\"note\": \"</tool_call>\"}"))).toBe(false)
    const plain = jsonSchemaGrammar({ type: "string" })
    const format = responseFormatGrammar({ type: "json_schema", json_schema: { schema: { type: "string" } } })
    for (const r of [plain, format]) expect(accepts(parsed(r), "\"a <b>\"")).toBe(true)
  })

  it("free values (a tool without parameters, untyped keys and values) refuse a raw < too", () => {
    const g = parsed(toolCallGrammar({ tools: [{ function: { name: "f" } }], toolChoice: "required" }))
    const f = (args: string) => `<tool_call>\n{"name": "f", "arguments": ${args}}\n</tool_call>`
    expect(accepts(g, f("{\"a\": [\"\\u003cx\"]}"))).toBe(true)
    expect(accepts(g, f("{\"a\": [\"<x\"]}"))).toBe(false)
    expect(accepts(g, f("{\"<a\": 1}"))).toBe(false)
  })

  it("lengths count an escape as one character", () => {
    const g = callGrammar(noteTool({ type: "string", minLength: 2, maxLength: 3 }))
    expect(accepts(g, call("{\"note\": \"\\u003cab\"}"))).toBe(true)
    expect(accepts(g, call("{\"note\": \"\\u003c\\u003C\"}"))).toBe(true)
    expect(accepts(g, call("{\"note\": \"\\u003cabc\"}"))).toBe(false)
    expect(accepts(g, call("{\"note\": \"\\u003c\"}"))).toBe(false)
  })

  it("a pattern, an enum, a const and a key holding < are written escaped, and stay exact", () => {
    const pattern = callGrammar(noteTool({ type: "string", pattern: "^<[a-z]+>$" }))
    expect(accepts(pattern, call("{\"note\": \"\\u003cab>\"}"))).toBe(true)
    expect(accepts(pattern, call("{\"note\": \"\\u003Cab>\"}"))).toBe(true)
    expect(accepts(pattern, call("{\"note\": \"<ab>\"}"))).toBe(false)
    expect(accepts(pattern, call("{\"note\": \"\\u003c>\"}"))).toBe(false)
    const negated = callGrammar(noteTool({ type: "string", pattern: "^[^a-z]$" }))
    expect([accepts(negated, call("{\"note\": \"\\u003c\"}")), accepts(negated, call("{\"note\": \"<\"}"))]).toEqual([true, false])
    const literal = callGrammar(noteTool({ enum: ["<b>", "c"] }))
    expect([accepts(literal, call("{\"note\": \"\\u003cb>\"}")), accepts(literal, call("{\"note\": \"<b>\"}"))]).toEqual([true, false])
    const key: RequestTool = { name: "send_note", parameters: { type: "object", properties: { "<k>": { const: 1 } }, required: ["<k>"] } }
    expect([accepts(callGrammar(key), call("{\"\\u003ck>\": 1}")), accepts(callGrammar(key), call("{\"<k>\": 1}"))]).toEqual([true, false])
  })

  it("a grammar-accepted call holding the markup in an argument round-trips through the session, at every split", () => {
    const tool = noteTool({ type: "string", maxLength: 40 })
    const g = callGrammar(tool)
    const note = fc.oneof(
      fc.constantFrom("<tool_call>", "</tool_call>", "a </tool_call>\n<tool_call>\n{\"name\": \"x\"}", "<TOOL_CALL>", "<function=f>", "<<tool_call"),
      fc.string({ unit: fc.constantFrom("<", "/", ">", "t", "o", "l", "_", "c", "a", "\n", "\"", "\\"), maxLength: 40 })
    )
    fc.assert(
      fc.property(note, fc.array(fc.nat(), { maxLength: 5 }), (text, cuts) => {
        const answer = call(escaped(JSON.stringify({ note: text })))
        expect(accepts(g, answer)).toBe(true)
        expect(throughSession(tool, answer, cuts)).toEqual({ args: [{ note: text }], error: [] })
      }),
      { numRuns: 300 }
    )
  })

  it("the same call with the markup written raw (what the grammar refuses) splits in the session", () => {
    const tool = noteTool({ type: "string" })
    const answer = call(JSON.stringify({ note: "see </tool_call> here" }))
    expect(accepts(callGrammar(tool), answer)).toBe(false)
    expect(throughSession(tool, answer).args).toEqual([])
  })

  it("sampled calls whose schema demands the markup are valid, and decode to it through the session", () => {
    const tool = noteTool({ type: "string", pattern: "^</?tool_call>[a-z<]{0,3}$" })
    const g = callGrammar(tool)
    const random = makeRandom(21)
    for (let i = 0; i < 200; i++) {
      const answer = sample(g, random)
      const { args, error } = throughSession(tool, answer)
      expect(error, answer).toEqual([])
      expect(args.length).toBe(1)
      const verdict = validateToolCalls([{ name: "send_note", arguments: JSON.stringify(args[0]) }], [tool], { _tag: "Required" })
      expect(verdict).toEqual({ _tag: "Valid" })
    }
  })
})
