import { describe, expect, it } from "@effect/vitest"
import { runSession } from "../../support/runSession.js"
import { compileLinear, ENGINE_CODE } from "../../../src/chat/toolcalls/linearRegExp.js"
import type { ParsedToolCall, RequestTool } from "../../../src/chat/toolcalls/types.js"
import {
  type Draft,
  GENERATION_SCHEMA_CHARS,
  GENERATION_SCHEMAS,
  MAX_VALIDATED_ARGUMENT_BYTES,
  regExpEngineOf,
  validateToolCalls,
  validatorCacheStats
} from "../../../src/chat/toolcalls/validate.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import { sessionConfig } from "../../support/fixtures.js"

const c = (name: string, args: unknown): ParsedToolCall => ({ name, arguments: JSON.stringify(args) })
const reason = (tool: RequestTool, args: unknown) => {
  const verdict = validateToolCalls([c(tool.name, args)], [tool], { _tag: "Auto" })
  return verdict._tag === "Invalid" ? verdict.reason : "valid"
}

const DRAFTS: ReadonlyArray<Draft> = ["2020", "2019", "07"]
const SCHEMA_URIS: Record<Draft, string> = {
  "2020": "https://json-schema.org/draft/2020-12/schema",
  "2019": "https://json-schema.org/draft/2019-09/schema",
  "07": "http://json-schema.org/draft-07/schema#"
}
const evil = (draft: Draft): RequestTool => ({
  name: "evil",
  parameters: {
    $schema: SCHEMA_URIS[draft],
    type: "object",
    properties: { s: { type: "string", pattern: "^(a+)+$" } },
    patternProperties: { "^(a+)+$": { type: "integer" } },
    additionalProperties: false
  }
})

describe("strict validation against hostile patterns (ReDoS)", () => {
  it("gives every ajv compiler the RE2 engine, which answers with RE2 patterns", () => {
    for (const draft of DRAFTS) {
      const engine = regExpEngineOf(draft)
      expect(engine.code).toBe(ENGINE_CODE)
      expect(String(engine("^(a+)+$", "u"))).toBe("re2:^(a+)+$")
    }
  })

  it("a pattern RE2 cannot run (lookaround, backreferences) makes the schema invalid, naming the pattern", () => {
    // V8 runs all of these; only a schema compiled without the backtracking engine rejects them.
    const patterns = ["(?<=a)b", "(?<!a)b", "a(?=b)", "a(?!b)", "(a)\\1", "(?<x>a)\\k<x>"]
    for (const pattern of patterns) {
      for (const where of ["pattern", "patternProperties"] as const) {
        const parameters = where === "pattern"
          ? { type: "object", properties: { s: { type: "string", pattern } } }
          : { type: "object", patternProperties: { [pattern]: {} } }
        const text = reason({ name: "t", parameters }, { s: "ab" })
        expect(text).toMatch(/^tool "t": the tool's parameters schema is invalid: pattern /)
        expect(text).toContain(`${JSON.stringify(pattern)} cannot be matched in linear time`)
      }
    }
  })

  it("a strict session fails such a call with ToolValidationFailed (tool_validation_error), never a crash", () => {
    const lookbehind: RequestTool = { name: "lb", parameters: { properties: { s: { pattern: "(?<=a)b" } } } }
    for (const [tool, args, expected] of [
      [lookbehind, { s: "ab" }, "pattern \"(?<=a)b\" cannot be matched in linear time"],
      [evil("2020"), { s: `${"a".repeat(40)}!` }, "/s must match pattern"]
    ] as const) {
      const out = runSession(sessionConfig({ tools: [tool], policy: { strict: true } }), [
        RunEvent.complete({
          finishReason: "tool_calls",
          toolCalls: [{ name: tool.name, arguments: JSON.stringify(args) }],
          metadata: {}
        })
      ])
      expect(out.map((e) => e._tag)).toEqual(["Error"])
      expect(out[0]).toMatchObject({ error: { _tag: "ToolValidationFailed" } })
      expect(out[0]?._tag === "Error" && out[0].error.message).toContain(expected)
    }
  })

  it("a pattern that is not ECMA-262 is invalid rather than rewritten", () => {
    expect(compileLinear("\\Z")).toMatchObject({ ok: false })
    expect(compileLinear("[")).toMatchObject({ ok: false })
    expect(reason({ name: "t", parameters: { properties: { s: { pattern: "\\Z" } } } }, { s: "Z" })).toContain(
      "the tool's parameters schema is invalid: pattern \"\\\\Z\""
    )
  })

  it("^(a+)+$ against 26, 40 and 100,000 a's and a '!' is a plain mismatch, in pattern and patternProperties", () => {
    // The engine check comes first: with the backtracking engine the inputs below never finish.
    expect(regExpEngineOf("2020").code).toBe(ENGINE_CODE)
    for (const draft of DRAFTS) {
      for (const n of [26, 40, 100_000]) {
        const input = `${"a".repeat(n)}!`
        expect(reason(evil(draft), { s: input })).toBe(`tool "evil": /s must match pattern "^(a+)+$" (pattern)`)
        expect(reason(evil(draft), { [input]: 1 })).toContain("must NOT have additional properties")
      }
      expect(reason(evil(draft), { s: "aaaa", aaa: 1 })).toBe("valid")
      expect(reason(evil(draft), { aaa: "x" })).toBe(`tool "evil": /aaa must be integer (type)`)
    }
  })

  it("translates ECMA-262 syntax RE2 spells differently, and keeps common patterns' meaning", () => {
    const cases: ReadonlyArray<readonly [string, string, boolean]> = [
      ["^\\u00e9$", "é", true],
      ["^[\\u0000-\\u001f]+$", "\u0001\u001f", true],
      ["^\\u{1F600}$", "😀", true],
      ["^(?<year>\\d{4})-\\d{2}$", "2024-05", true],
      ["^\\p{L}+$", "héllo", true],
      ["^\\p{L}+$", "h3llo", false],
      ["^.$", "😀", true],
      ["^[^]$", "\n", true],
      ["^[a-z0-9_-]{1,64}$", "get_weather", true],
      ["^https?:\\/\\/", "ftp://x", false],
      ["abc", "xxabcxx", true],
      ["^abc$", "abc\n", false]
    ]
    for (const [pattern, input, matches] of cases) {
      const compiled = compileLinear(pattern)
      expect(compiled.ok ? compiled.regExp.test(input) : compiled.error, pattern).toBe(matches)
      expect(new RegExp(pattern, "u").test(input), pattern).toBe(matches)
    }
  })
})

describe("strict validation bounds its work per response", () => {
  const free: RequestTool = { name: "free", parameters: { type: "object" } }
  it(`validates at most ${MAX_VALIDATED_ARGUMENT_BYTES} bytes of arguments, all calls together`, () => {
    const half = { s: "é".repeat(MAX_VALIDATED_ARGUMENT_BYTES / 4 - 8) }
    const ok = validateToolCalls([c("free", half)], [free], { _tag: "Auto" })
    expect(ok._tag).toBe("Valid")
    const verdict = validateToolCalls([c("free", half), c("free", half), c("free", half)], [free], { _tag: "Auto" })
    expect(verdict).toEqual({
      _tag: "Invalid",
      reason: `the tool calls' arguments (${3 * (JSON.stringify(half).length + half.s.length)} bytes) exceed the ` +
        `${MAX_VALIDATED_ARGUMENT_BYTES} bytes validated`
    })
  })
})

describe("compiled validators are bounded (ajv keeps all it compiled until the instance goes)", () => {
  it(`holds at most ${GENERATION_SCHEMAS} validators, past thousands of distinct schemas`, () => {
    const start = validatorCacheStats().generation
    let most = 0
    for (let i = 0; i < 2_000; i++) {
      const tool: RequestTool = { name: "t", parameters: { type: "object", properties: { v: { const: `n${i}` } } } }
      expect(reason(tool, { v: `n${i}` })).toBe("valid")
      const stats = validatorCacheStats()
      most = Math.max(most, stats.validators)
      expect(stats.validators).toBeLessThanOrEqual(GENERATION_SCHEMAS)
      expect(stats.compilers).toBeLessThanOrEqual(3)
    }
    expect(most).toBe(GENERATION_SCHEMAS)
    expect(validatorCacheStats().generation - start).toBeGreaterThanOrEqual(7)
  })

  it("holds at most about GENERATION_SCHEMA_CHARS of schema JSON", () => {
    const big = 1024 * 1024
    const start = validatorCacheStats().generation
    for (let i = 0; i < 12; i++) {
      const tool: RequestTool = {
        name: "t",
        parameters: { type: "object", description: "x".repeat(big), properties: { v: { const: i } } }
      }
      expect(reason(tool, { v: i })).toBe("valid")
      const stats = validatorCacheStats()
      expect(stats.compiledChars).toBeLessThanOrEqual(GENERATION_SCHEMA_CHARS + big + 100)
    }
    // 12 MiB of schemas in generations of 4 MiB (the last one to exceed it included).
    expect(validatorCacheStats().generation - start).toBeGreaterThanOrEqual(2)
  })

  it("a schema seen again in the same generation is not compiled again", () => {
    const tool: RequestTool = { name: "t", parameters: { type: "object", properties: { v: { const: "again" } } } }
    expect(reason(tool, { v: "again" })).toBe("valid")
    const before = validatorCacheStats()
    for (let i = 0; i < 10; i++) expect(reason(tool, { v: "no" })).toContain("must be equal to constant")
    expect(validatorCacheStats()).toEqual(before)
  })
})
