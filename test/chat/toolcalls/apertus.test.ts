import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { apertus } from "../../../src/chat/toolcalls/apertus.js"
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

const parse = (body: string) => apertus.parse(body, true, tools)

describe("apertus", () => {
  it("parses [{\"NAME\": {arguments}}, ...] as the template writes it", () => {
    expect(parse("[{\"get_weather\": {\"city\": \"Paris\"}}, {\"search\": {\"query\": \"q \\\"x\\\" 😀\\n\", \"n\": {\"a\": []}}}]"))
      .toEqual(calls([["get_weather", { city: "Paris" }], ["search", { query: "q \"x\" 😀\n", n: { a: [] } }]]))
    expect(parse("[{\"search\": {}}]")).toEqual(calls([["search", {}]]))
    // A tool named `name` is still the one-key form; arguments as a JSON string are decoded.
    expect(parse("[{\"name\": {\"x\": 1}}, {\"a\": \"{\\\"y\\\": 2}\"}]")).toEqual(calls([["name", { x: 1 }], ["a", { y: 2 }]]))
  })

  it("reads the {name, arguments} shape too", () => {
    expect(parse("[{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}]")).toEqual(calls([["search", { query: "x" }]]))
    expect(parse("{\"name\": \"search\"}")).toEqual(calls([["search", {}]]))
  })

  it("is malformed on broken JSON or arguments that are not an object", () => {
    for (const body of ["[{\"search\": {]", "[{\"search\": 3}]", "[{\"\": {}}]", "[1]", "[]", ""]) {
      expect(parse(body)._tag).toBe("Malformed")
    }
  })

  it("at every split", () => {
    expectEverySplit(
      "On it. <|tools_prefix|>[{\"search\": {\"query\": \"x\"}}]<|tools_suffix|>",
      options(["apertus"]),
      [text("On it. "), called("search", { query: "x" })]
    )
  })

  const blocks = fc
    .tuple(randomCase("<|tools_prefix|>"), randomCase("<|tools_suffix|>"), gap, fc.array(anyCall, { minLength: 1, maxLength: 3 }))
    .map(([open, close, g, list]) => {
      const body = `[${list.map((c) => JSON.stringify({ [c.name]: c.args })).join(", ")}]`
      return block(`${open}${g}${body}${close}`, list.map((c) => called(c.name, c.args)), `${open}${g}${body}`)
    })
  const broken = fc.constantFrom("<|tools_prefix|>[{\"search\": 1}]<|tools_suffix|>").map((m) => block(m, [MALFORMED]))
  familyProperties(
    "apertus",
    fc.oneof({ arbitrary: blocks, weight: 4 }, { arbitrary: broken, weight: 1 }),
    ["<|tools", "<|tools_prefix", "tools_prefix|>", "<|tools_suffix", "<|inner_prefix|>"],
    /<\|tools_prefix\|$/i
  )
})
