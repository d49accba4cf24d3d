import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { llama3Json } from "../../../src/chat/toolcalls/llama3Json.js"
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

const parse = (body: string) => llama3Json.parse(body, true, tools)

describe("llama3_json", () => {
  it("parses one call with parameters (the template's shape) or arguments", () => {
    expect(parse("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}")).toEqual(
      calls([["get_weather", { city: "Paris" }]])
    )
    expect(parse("\n{\"name\":\"search\",\"arguments\":{\"query\":\"a \\\"b\\\" {c}\"}}\n")).toEqual(
      calls([["search", { query: "a \"b\" {c}" }]])
    )
  })

  it("parses calls separated by ; and an array of calls", () => {
    expect(parse("{\"name\":\"a\",\"parameters\":{}}; {\"name\":\"b\",\"parameters\":{\"x\":[1,{\"y\":\";\"}]}}")).toEqual(
      calls([["a", {}], ["b", { x: [1, { y: ";" }] }]])
    )
    expect(parse("[{\"name\":\"a\"},{\"name\":\"b\",\"parameters\":{\"n\":\"é😀\\n\"}}]")).toEqual(
      calls([["a", {}], ["b", { n: "é😀\n" }]])
    )
  })

  it("is malformed on python code, broken JSON, text after the calls, or no name", () => {
    for (
      const body of [
        "import math\nprint(math.pi)",
        "brave_search.call(query=\"x\")",
        "{\"name\": \"a\", \"parameters\": {",
        "{\"name\": \"a\"} and then",
        "{\"parameters\": {}}",
        "{\"name\": \"a\", \"parameters\": [1]}",
        "",
        "[]"
      ]
    ) {
      expect(parse(body)._tag).toBe("Malformed")
    }
  })

  it("ends at <|eom_id|> or at the end of the response, at every split", () => {
    const body = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Zürich 😀\"}}"
    const weather = called("get_weather", { city: "Zürich 😀" })
    expectEverySplit(`Sure.<|python_tag|>${body}<|eom_id|>`, options(["llama3_json"]), [text("Sure."), weather])
    expectEverySplit(`<|python_tag|>${body}; ${body}`, options(["llama3_json"]), [weather, weather])
    expectEverySplit("<|python_tag|>x = 1<|eom_id|> ok", options(["llama3_json"]), [MALFORMED, text(" ok")])
  })

  const blocks = fc
    .tuple(
      randomCase("<|python_tag|>"),
      gap,
      fc.array(anyCall, { minLength: 1, maxLength: 3 }),
      fc.constantFrom("; ", ";", " ;\n"),
      fc.boolean(),
      gap
    )
    .map(([open, g1, list, sep, parameters, g2]) => {
      const key = parameters ? "parameters" : "arguments"
      const body = list.map((c) => JSON.stringify({ name: c.name, [key]: c.args })).join(sep)
      const unclosed = `${open}${g1}${body}${g2}`
      return block(`${unclosed}<|eom_id|>`, list.map((c) => called(c.name, c.args)), unclosed)
    })
  const broken = fc.constantFrom("<|python_tag|>print(1)<|eom_id|>", "<|python_tag|>{\"name\": }<|EOM_ID|>").map((m) =>
    block(m, [MALFORMED])
  )
  familyProperties(
    "llama3_json",
    fc.oneof({ arbitrary: blocks, weight: 4 }, { arbitrary: broken, weight: 1 }),
    ["<|python", "<|python_tag", "python_tag|>", "<|eom_id", "<|Python_Tag x", "{\"name\": \"search\"}"],
    /<\|python_tag\|$/i
  )
})
