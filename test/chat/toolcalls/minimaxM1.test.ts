import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { minimaxM1 } from "../../../src/chat/toolcalls/minimaxM1.js"
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

describe("minimax_m1 (MiniMax-M1, Apriel)", () => {
  it("parses one JSON call a line (MiniMax-M1) or one JSON list (Apriel)", () => {
    const lines = "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n{\"name\": \"search\", \"arguments\": {}}\n"
    expect(minimaxM1.parse(lines, true, tools)).toEqual(calls([["get_weather", { city: "Oslo" }], ["search", {}]]))
    const list = "[{\"name\": \"a\", \"arguments\": {\"n\": [1, \"é😀\\n\"]}},\n {\"name\": \"b\", \"arguments\": {}}]"
    expect(minimaxM1.parse(list, true, tools)).toEqual(calls([["a", { n: [1, "é😀\n"] }], ["b", {}]]))
  })

  it("a body that is not calls is malformed", () => {
    for (const body of ["", "\n", "{oops}", "{\"name\": 1}", "{\"name\": \"a\", \"arguments\": 3}", "I will call it"]) {
      expect(minimaxM1.parse(body, true, tools)._tag).toBe("Malformed")
    }
  })

  it("at every split", () => {
    expectEverySplit(
      "Let me look.<tool_calls>\n{\"name\": \"search\", \"arguments\": {\"query\": \"<tool_call>😀\"}}\n</tool_calls> Done.",
      options(["minimax_m1", "xml"]),
      [text("Let me look."), called("search", { query: "<tool_call>😀" }), text(" Done.")]
    )
    expectEverySplit("ok <tool_calls> sorry </tool_calls>", options(["minimax_m1"]), [text("ok "), MALFORMED])
  })

  const blocks = fc
    .tuple(randomCase("<tool_calls>"), gap, fc.array(anyCall, { minLength: 1, maxLength: 3 }), randomCase("</tool_calls>"))
    .map(([open, g, list, close]) =>
      block(
        `${open}${g}${list.map((c) => JSON.stringify({ name: c.name, arguments: c.args })).join("\n")}\n${close}`,
        list.map((c) => called(c.name, c.args))
      )
    )
  familyProperties("minimax_m1", blocks, ["</tool_call", "<tool_callz", "tool_calls"], /<tool_calls$/i)
})
