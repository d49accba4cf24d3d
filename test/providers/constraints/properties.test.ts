import { FastCheck as fc } from "effect"
import { describe, expect, it } from "vitest"
import { validateToolCalls } from "../../../src/chat/toolcalls/validate.js"
import { jsonSchemaGrammar } from "../../../src/providers/constraints/jsonSchemaGbnf.js"
import { toolCallGrammar } from "../../../src/providers/constraints/toolCallGrammar.js"
import { accepts, type Grammar, makeRandom, parseGbnf, sample } from "../../support/gbnf.js"
import { gapsArbitrary, jsonWithWhitespace, schemaArbitrary, valueArbitrary } from "../../support/jsonSchemaArbitrary.js"

const grammarOf = (schema: unknown): { readonly grammar: Grammar; readonly unconstrained: ReadonlyArray<string> } => {
  const result = jsonSchemaGrammar(schema)
  if (result._tag !== "Grammar") throw new Error(`no grammar: ${JSON.stringify(result)}`)
  const parsed = parseGbnf(result.grammar)
  if (!parsed.ok) throw new Error(`${parsed.error}\n${result.grammar}`)
  return { grammar: parsed.grammar, unconstrained: result.unconstrained }
}

const verdict = (schema: unknown, text: string) =>
  validateToolCalls([{ name: "t", arguments: text }], [{ name: "t", parameters: schema as Record<string, unknown> }], {
    _tag: "Required"
  })

const schemaAndValue = schemaArbitrary.chain((schema) =>
  fc.tuple(fc.constant(schema), valueArbitrary(schema, schema), gapsArbitrary)
)

describe("JSON Schema → GBNF, properties", () => {
  it("the generated schemas compile with nothing left unconstrained", () => {
    fc.assert(fc.property(schemaArbitrary, (schema) => {
      expect(grammarOf(schema).unconstrained).toEqual([])
    }), { numRuns: 200 })
  })

  it("accepts the JSON text, with any allowed whitespace, of every schema-valid value", () => {
    fc.assert(
      fc.property(schemaAndValue, ([schema, value, gaps]) => {
        const text = jsonWithWhitespace(value, gaps)
        // The generators' values are valid: the property is about the grammar.
        expect(verdict(schema, text)).toEqual({ _tag: "Valid" })
        expect(accepts(grammarOf(schema).grammar, text)).toBe(true)
      }),
      { numRuns: 300 }
    )
  })

  it("every string the grammar produces parses as JSON and is valid against the schema", () => {
    fc.assert(
      fc.property(schemaArbitrary, fc.integer(), (schema, seed) => {
        const { grammar } = grammarOf(schema)
        const random = makeRandom(seed)
        for (let i = 0; i < 10; i++) {
          const text = sample(grammar, random)
          expect(accepts(grammar, text)).toBe(true)
          expect(verdict(schema, text), text).toEqual({ _tag: "Valid" })
        }
      }),
      { numRuns: 200 }
    )
  })
})

const CALL = /<tool_call>\n(\{"name": .*?)\n<\/tool_call>/gs

const callGrammarOf = (schema: unknown): Grammar => {
  const result = toolCallGrammar({ tools: [{ function: { name: "t", parameters: schema } }], toolChoice: "required" })
  if (result._tag !== "Grammar") throw new Error(result._tag)
  const parsed = parseGbnf(result.grammar)
  if (!parsed.ok) throw new Error(parsed.error)
  return parsed.grammar
}
const callOf = (args: string) => `<tool_call>\n{"name": "t", "arguments": ${args}}\n</tool_call>`

describe("the Hermes turn grammar, properties", () => {
  it("inside a call: accepts every schema-valid value with < written \\u003c, and refuses a raw <", () => {
    fc.assert(
      fc.property(schemaAndValue, ([schema, value, gaps]) => {
        const text = jsonWithWhitespace(value, gaps)
        const grammar = callGrammarOf(schema)
        expect(accepts(grammar, callOf(text.replace(/</g, "\\u003c")))).toBe(true)
        if (text.includes("<")) expect(accepts(grammar, callOf(text))).toBe(false)
      }),
      { numRuns: 300 }
    )
  })

  it("every sampled answer holds only valid calls of the request's tools, and no markup in its text", () => {
    fc.assert(
      fc.property(fc.array(schemaArbitrary, { minLength: 1, maxLength: 3 }), fc.constantFrom<"auto" | "required">("auto", "required"), fc.boolean(), fc.integer(), (schemas, choice, parallel, seed) => {
        const tools = schemas.map((parameters, i) => ({ function: { name: `tool_${i}`, parameters } }))
        const result = toolCallGrammar({ tools, toolChoice: choice, parallelToolCalls: parallel })
        if (result._tag !== "Grammar") throw new Error(result._tag)
        const parsed = parseGbnf(result.grammar)
        if (!parsed.ok) throw new Error(parsed.error)
        const random = makeRandom(seed)
        for (let i = 0; i < 5; i++) {
          const text = sample(parsed.grammar, random)
          const calls = [...text.matchAll(CALL)]
          const first = calls[0]
          const prose = first === undefined ? text : text.slice(0, first.index)
          expect(prose.includes("<tool_call>")).toBe(false)
          if (choice === "required") expect(prose).toBe("")
          if (choice === "required") expect(calls.length).toBeGreaterThan(0)
          if (!parallel) expect(calls.length).toBeLessThanOrEqual(1)
          for (const call of calls) {
            expect(call[1]).not.toContain("<")
            const json = JSON.parse(call[1] ?? "") as { name: string; arguments: unknown }
            const tool = tools.find((t) => t.function.name === json.name)
            expect(tool).toBeDefined()
            expect(verdict(tool?.function.parameters, JSON.stringify(json.arguments))).toEqual({ _tag: "Valid" })
          }
        }
      }),
      { numRuns: 100 }
    )
  })
})
