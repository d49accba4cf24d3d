import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { cohere } from "../../../src/chat/toolcalls/cohere.js"
import {
  anyCall,
  block,
  called,
  calls,
  expectEverySplit,
  familyProperties,
  gap,
  MALFORMED,
  options,
  randomCase,
  text,
  tools
} from "./holdbackHarness.js"

const parse = (body: string, closed = true) => cohere.parse(body, closed, tools)

describe("cohere", () => {
  it("parses the template's list of tool_name / parameters, with its ids", () => {
    const body = "[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}},\n" +
      "    {\"tool_call_id\": \"1\", \"tool_name\": \"search\", \"parameters\": {\"query\": \"a\\\"b\\n😀\", \"f\": {\"x\": [1]}}}\n]"
    expect(parse(body)).toEqual(
      calls([["get_weather", { city: "Paris" }], ["search", { query: "a\"b\n😀", f: { x: [1] } }]])
    )
  })

  it("reads name / arguments too, and empty parameters", () => {
    expect(parse("[{\"name\": \"a\", \"arguments\": {\"n\": 1}}, {\"tool_name\": \"b\", \"parameters\": {}}]")).toEqual(
      calls([["a", { n: 1 }], ["b", {}]])
    )
  })

  it("is malformed on broken JSON, no tool name, or arguments that are not an object", () => {
    for (const body of ["[{\"tool_name\": ", "[{\"parameters\": {}}]", "[{\"tool_name\": \"a\", \"parameters\": 1}]", "", "[]"]) {
      expect(parse(body)._tag).toBe("Malformed")
    }
  })

  it("at every split, reasoning and response markers left to the session", () => {
    const t = "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"search\", \"parameters\": {\"query\": \"x\"}}]" +
      "<|END_ACTION|>"
    expectEverySplit(`Plan done.${t}`, options(["cohere"]), [text("Plan done."), called("search", { query: "x" })])
    expectEverySplit(`${t.slice(0, -"<|END_ACTION|>".length)}`, options(["cohere"]), [called("search", { query: "x" })])
  })

  const blocks = fc
    .tuple(randomCase("<|START_ACTION|>"), randomCase("<|END_ACTION|>"), gap, fc.array(anyCall, { minLength: 1, maxLength: 3 }))
    .map(([open, close, g, list]) => {
      const body = JSON.stringify(list.map((c, i) => ({ tool_call_id: String(i), tool_name: c.name, parameters: c.args })))
      return block(`${open}${g}${body}${g}${close}`, list.map((c) => called(c.name, c.args)), `${open}${g}${body}${g}`)
    })
  const broken = fc.constantFrom("<|START_ACTION|>[{\"tool_name\": }]<|END_ACTION|>").map((m) => block(m, [MALFORMED]))
  familyProperties(
    "cohere",
    fc.oneof({ arbitrary: blocks, weight: 4 }, { arbitrary: broken, weight: 1 }),
    ["<|START", "<|START_ACTION", "START_ACTION|>", "<|END_ACTION", "<|START_RESPONSE|>", "<|END_THINKING|>"],
    /<\|start_action\|$/i
  )
})
