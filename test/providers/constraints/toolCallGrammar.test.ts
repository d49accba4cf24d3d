import { describe, expect, it } from "vitest"
import { makeRuleSet, render } from "../../../src/providers/constraints/gbnf.js"
import { responseFormatGrammar, textWithout, toolCallGrammar } from "../../../src/providers/constraints/toolCallGrammar.js"
import { accepts, parseGbnf } from "../../support/gbnf.js"

const weather = { function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }
const time = { function: { name: "get_time", parameters: { type: "object", properties: {}, additionalProperties: false } } }
const call = (name: string, args: string) => `<tool_call>\n{"name": "${name}", "arguments": ${args}}\n</tool_call>`
const W = call("get_weather", "{\"city\": \"Oslo\"}")
const T = call("get_time", "{}")

const grammar = (r: ReturnType<typeof toolCallGrammar>) => {
  if (r._tag !== "Grammar") throw new Error(r._tag)
  const p = parseGbnf(r.grammar)
  if (!p.ok) throw new Error(p.error)
  return (text: string) => accepts(p.grammar, text)
}

describe("toolCallGrammar", () => {
  it("auto: free text, then optionally calls; the text never holds <tool_call>", () => {
    const ok = grammar(toolCallGrammar({ tools: [weather, time] }))
    for (const t of ["", "Hello", "a <tool_cal b", "x<tool_call", "<<tool_call", W, `Let me check.\n${W}\n${T}`, `<tool${W}`]) {
      expect(ok(t), t).toBe(true)
    }
    for (const t of ["see <tool_call> here", `${W} trailing`, call("get_weather", "{}"), call("nope", "{}"), `${W}\n\n${T}`]) {
      expect(ok(t), t).toBe(false)
    }
  })

  it("required: calls at once; parallel_tool_calls false: exactly one", () => {
    const ok = grammar(toolCallGrammar({ tools: [weather, time], toolChoice: "required", parallelToolCalls: false }))
    expect([ok(W), ok(T), ok(""), ok(`hi${W}`), ok(`${W}\n${T}`)]).toEqual([true, true, false, false, false])
    const many = grammar(toolCallGrammar({ tools: [weather, time], toolChoice: "required" }))
    expect(many(`${W}\n${T}\n${W}`)).toBe(true)
    expect(many(Array.from({ length: 17 }, () => T).join("\n"))).toBe(false)
  })

  it("a named tool: only that one; unknown name, none, no tools: no grammar", () => {
    const ok = grammar(toolCallGrammar({ tools: [weather, time], toolChoice: { function: { name: "get_time" } } }))
    expect([ok(T), ok(W)]).toEqual([true, false])
    expect(toolCallGrammar({ tools: [weather], toolChoice: { function: { name: "x" } } })).toEqual({ _tag: "NoGrammar", reason: "UnknownTool" })
    expect(toolCallGrammar({ tools: [weather], toolChoice: "none" })).toEqual({ _tag: "NoGrammar", reason: "ToolChoiceNone" })
    expect(toolCallGrammar({ tools: [] })).toEqual({ _tag: "NoGrammar", reason: "NoTools" })
  })

  it("a tool without parameters takes any object; untyped parameters are an object", () => {
    const ok = grammar(toolCallGrammar({ tools: [{ function: { name: "f" } }, { function: { name: "g", parameters: { properties: { a: {} } } } }], toolChoice: "required" }))
    expect([ok(call("f", "{\"x\": [1]}")), ok(call("f", "1")), ok(call("g", "{\"a\": 1}")), ok(call("g", "[]"))]).toEqual([true, false, true, false])
  })

  it("reports unconstrained parts under /tools/<i>/function/parameters", () => {
    const r = toolCallGrammar({ tools: [weather, { function: { name: "n", parameters: { type: "object", properties: { x: { type: "number", maximum: 3, multipleOf: 2 } } } } }] })
    expect(r._tag === "Grammar" && r.unconstrained).toEqual(["/tools/1/function/parameters/properties/x/multipleOf"])
  })

  it("textWithout: the states of the tag's matcher", () => {
    const rules = makeRuleSet()
    const root = rules.reserve("root")
    rules.fill(root, textWithout(rules, "<ab>") ?? "")
    const p = parseGbnf(render(rules.rules()))
    if (!p.ok) throw new Error(p.error)
    for (const t of ["", "<a", "<<ab", "<ab<ab", "a<b>", "<a<ab"]) expect(accepts(p.grammar, t), t).toBe(true)
    for (const t of ["<ab>", "x<ab>y", "<<ab>", "<a<ab>"]) expect(accepts(p.grammar, t), t).toBe(false)
    expect(textWithout(makeRuleSet(), "abca")).toBeUndefined()
  })

  it("response_format: json_schema is its schema, json_object any object, text none", () => {
    const ok = grammar(responseFormatGrammar({ type: "json_schema", json_schema: { name: "x", schema: { type: "array", items: { type: "integer" } } } }))
    expect([ok("[1, 2]"), ok("{}")]).toEqual([true, false])
    const obj = grammar(responseFormatGrammar({ type: "json_object" }))
    expect([obj("{\"a\": 1}"), obj("[]")]).toEqual([true, false])
    expect(responseFormatGrammar({ type: "text" })).toEqual({ _tag: "NoGrammar", reason: "NotJsonSchema" })
  })
})
