import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { granite } from "../../../src/chat/toolcalls/granite.js"
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

/** The index just past where the scan ends the block, or -1. */
const scanEnd = (body: string): number => {
  let s = granite.start
  for (let i = 0; i < body.length; i++) {
    s = granite.step(s, body.charCodeAt(i))
    if (granite.done(s)) return i + 1
  }
  return -1
}

describe("granite", () => {
  it("parses the JSON list of calls, one or several, and ends where it closes", () => {
    const one = " [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"] } [ \\\" ]\"}}]"
    expect(scanEnd(`${one} tail`)).toBe(one.length)
    expect(granite.parse(one, true, tools)).toEqual(calls([["get_weather", { city: "] } [ \" ]" }]]))
    const two = "[\n{\"name\": \"a\", \"arguments\": {}},\n{\"name\": \"b\", \"arguments\": {\"n\": {\"deep\": [1, \"é😀\\n\"]}}}\n]"
    expect(granite.parse(two, true, tools)).toEqual(calls([["a", {}], ["b", { n: { deep: [1, "é😀\n"] } }]]))
    expect(granite.parse("{\"name\":\"a\"}", true, tools)).toEqual(calls([["a", {}]]))
  })

  it("never ends on a body that is not JSON, and that body is malformed", () => {
    expect(scanEnd(" I cannot [x] {}")).toBe(-1)
    expect(granite.parse(" I cannot", false, tools)._tag).toBe("Malformed")
    for (const body of ["[{\"name\": }]", "[]", "[{\"arguments\": {}}]", "[{\"name\": \"a\", \"arguments\": 3}]"]) {
      expect(granite.parse(body, true, tools)._tag).toBe("Malformed")
    }
  })

  it("at every split", () => {
    const list = "[{\"name\": \"search\", \"arguments\": {\"query\": \"<|tool_call|>😀\"}}]"
    expectEverySplit(`Let me look.<|tool_call|>${list} Done.`, options(["granite"]), [
      text("Let me look."),
      called("search", { query: "<|tool_call|>😀" }),
      text(" Done.")
    ])
    expectEverySplit("ok <|tool_call|> sorry", options(["granite"]), [text("ok "), MALFORMED])
  })

  const blocks = fc
    .tuple(randomCase("<|tool_call|>"), gap, fc.array(anyCall, { minLength: 1, maxLength: 3 }))
    .map(([open, g, list]) =>
      block(
        `${open}${g}${JSON.stringify(list.map((c) => ({ name: c.name, arguments: c.args })))}`,
        list.map((c) => called(c.name, c.args))
      )
    )
  const broken = fc.constantFrom("<|tool_call|>[{\"name\": 1}]", "<|tool_call|>[]").map((m) => block(m, [MALFORMED]))
  familyProperties(
    "granite",
    fc.oneof({ arbitrary: blocks, weight: 4 }, { arbitrary: broken, weight: 1 }),
    ["<|tool", "<|tool_call", "<|tool_calls|>", "tool_call|>", "<|TOOL_CALL x"],
    /<\|tool_call\|$/i
  )
})
