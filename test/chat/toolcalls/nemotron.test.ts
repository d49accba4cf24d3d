import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { nemotron } from "../../../src/chat/toolcalls/nemotron.js"
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

const parse = (body: string) => nemotron.parse(body, true, tools)

describe("nemotron", () => {
  it("parses the list of calls, arguments as an object or as a JSON string (the template's example)", () => {
    expect(parse("[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"search\", " +
      "\"arguments\": \"{\\\"query\\\": \\\"é😀\\\"}\"}]")).toEqual(
      calls([["get_weather", { city: "Paris" }], ["search", { query: "é😀" }]])
    )
    expect(parse("[{\"name\": \"search\", \"arguments\": {}}]")).toEqual(calls([["search", {}]]))
  })

  it("is malformed on broken JSON or without a name", () => {
    for (const body of ["[{\"name\": ", "[{\"arguments\": {}}]", "[]", ""]) expect(parse(body)._tag).toBe("Malformed")
  })

  it("at every split; <tool_call> stays text with only nemotron on", () => {
    expectEverySplit(
      "<TOOLCALL>[{\"name\": \"search\", \"arguments\": {\"query\": \"</TOOL\"}}]</TOOLCALL>\n",
      options(["nemotron"]),
      [called("search", { query: "</TOOL" })]
    )
    expectEverySplit("a <tool_call> b", options(["nemotron"]), [text("a <tool_call> b")])
  })

  const blocks = fc
    .tuple(randomCase("<TOOLCALL>"), randomCase("</TOOLCALL>"), gap, fc.array(anyCall, { minLength: 1, maxLength: 3 }))
    .map(([open, close, g, list]) => {
      const body = JSON.stringify(list.map((c) => ({ name: c.name, arguments: c.args })))
      return block(`${open}${g}${body}${close}`, list.map((c) => called(c.name, c.args)), `${open}${g}${body}`)
    })
  const broken = fc.constantFrom("<TOOLCALL>[{\"name\": }]</TOOLCALL>").map((m) => block(m, [MALFORMED]))
  familyProperties(
    "nemotron",
    fc.oneof({ arbitrary: blocks, weight: 4 }, { arbitrary: broken, weight: 1 }),
    ["<TOOL", "<TOOLCAL", "<TOOLCALLS>", "TOOLCALL>", "<TOOL_RESPONSE>", "</TOOLCALL"],
    /<toolcall$/i
  )
})
