import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { functionaryV31 } from "../../../src/chat/toolcalls/functionaryV31.js"
import {
  anyCall,
  block,
  called,
  calls,
  expectEverySplit,
  familyProperties,
  MALFORMED,
  options,
  randomCase,
  text,
  tools
} from "./holdbackHarness.js"

const parse = (body: string, closed = true) => functionaryV31.parse(body, closed, tools)

describe("functionary_v31", () => {
  it("parses NAME>{json} as the template writes it", () => {
    expect(parse("get_weather>{\"city\": \"Paris\", \"n\": {\"a\": [\"</function\"]}}")).toEqual(
      calls([["get_weather", { city: "Paris", n: { a: ["</function"] } }]])
    )
    expect(parse("search>{}")).toEqual(calls([["search", {}]]))
    expect(parse("search>")).toEqual(calls([["search", {}]]))
    expect(parse(" search >\"{\\\"query\\\": \\\"é😀\\\\n\\\"}\"")).toEqual(calls([["search", { query: "é😀\n" }]]))
  })

  it("reads Qwen3-Coder's parameter form, typed by the tool's schema", () => {
    expect(parse("get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n")).toEqual(
      calls([["get_weather", { city: "Paris", days: 3 }]])
    )
  })

  it("is malformed on an unterminated tag, no name, or arguments that are not an object", () => {
    for (const body of ["get_weather", ">{}", "a>{\"x\": ", "a>[1]", "a>hello"]) expect(parse(body)._tag).toBe("Malformed")
  })

  it("at every split; <function without = is text", () => {
    expectEverySplit(
      "Checking.<function=get_weather>{\"city\": \"Paris\"}</function><function=search>{\"query\": \"x\"}</function>",
      options(["functionary_v31"]),
      [text("Checking."), called("get_weather", { city: "Paris" }), called("search", { query: "x" })]
    )
    expectEverySplit("a <function> b <function", options(["functionary_v31"]), [text("a <function> b <function")])
  })

  it("leaves <function= inside a qwen3_xml block to qwen3_xml", () => {
    const qwen = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
    expectEverySplit(qwen, options(["qwen3_xml", "functionary_v31"]), [called("get_weather", { city: "Paris" })])
  })

  const blocks = fc.tuple(randomCase("<function="), randomCase("</function>"), anyCall).map(([open, close, c]) => {
    const head = `${open}${c.name}>${JSON.stringify(c.args)}`
    return block(`${head}${close}`, [called(c.name, c.args)], head)
  })
  const broken = fc.constantFrom("<function=search>{\"query\": </function>", "<function=>{}</function>").map((m) =>
    block(m, [MALFORMED])
  )
  familyProperties(
    "functionary_v31",
    fc.oneof({ arbitrary: blocks, weight: 4 }, { arbitrary: broken, weight: 1 }),
    ["<function", "<function>", "function=", "</function", "<Function x=1>", "<functions="],
    /$^/
  )
})
