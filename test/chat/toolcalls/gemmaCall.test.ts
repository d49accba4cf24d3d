import { describe, expect, it } from "@effect/vitest"
import { functionGemma, gemma4 } from "../../../src/chat/toolcalls/gemmaCall.js"
import type { RequestTool } from "../../../src/chat/toolcalls/types.js"

const tools: ReadonlyArray<RequestTool> = [
  {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string" },
        days: { type: "integer" },
        metric: { type: "boolean" },
        tags: { type: "array" },
        code: { type: "string" }
      }
    }
  }
]

const calls = (list: ReadonlyArray<readonly [string, unknown]>) => ({
  _tag: "Calls",
  calls: list.map(([name, args]) => ({ name, arguments: JSON.stringify(args) }))
})

const Q = "<|\"|>"
const E = "<escape>"

describe("gemma4", () => {
  it("parses the template's call: strings between <|\"|>, bare numbers and booleans", () => {
    expect(gemma4.parse(`call:get_weather{city:${Q}Paris, "FR" {x}${Q},days:3,metric:true}`, true, tools)).toEqual(
      calls([["get_weather", { city: "Paris, \"FR\" {x}", days: 3, metric: true }]])
    )
  })

  it("nests objects (bare or quoted keys) and arrays, and keeps newlines and unicode", () => {
    const body = `call:get_weather{tags:[${Q}a${Q},2,{k:${Q}v\nw 😀${Q}}],opts:{${Q}deep${Q}:{n:None,x:1.5}}}`
    expect(gemma4.parse(body, true, tools)).toEqual(
      calls([["get_weather", { tags: ["a", 2, { k: "v\nw 😀" }], opts: { deep: { n: null, x: 1.5 } } }]])
    )
  })

  it("types by the schema: a number written for a string stays text, a quoted number for an integer is one", () => {
    expect(gemma4.parse(`call:get_weather{code:007,days:${Q}4${Q},city:42}`, true, tools)).toEqual(
      calls([["get_weather", { code: "007", days: 4, city: "42" }]])
    )
    // An undeclared tool: bare values are read as JSON, else text; quoted values stay strings.
    expect(gemma4.parse(`call:other{a:7,b:maybe,c:${Q}8${Q}}`, true, tools)).toEqual(
      calls([["other", { a: 7, b: "maybe", c: "8" }]])
    )
  })

  it("empty arguments, several calls in one block, whitespace", () => {
    expect(gemma4.parse(" call:get_weather{} \n call:other{ a : 1 }", true, tools)).toEqual(
      calls([["get_weather", {}], ["other", { a: 1 }]])
    )
  })

  it("is malformed when the body cannot be read", () => {
    for (
      const body of [
        "",
        "get_weather{}",
        "call:{}",
        "call:get_weather",
        "call:get_weather{city:}",
        `call:get_weather{city:${Q}open}`,
        "call:get_weather{city:1",
        "call:get_weather{:1}",
        "call:get_weather{a:[1,2}",
        "call:get_weather{} trailing"
      ]
    ) {
      expect(gemma4.parse(body, true, tools)).toMatchObject({
        _tag: "Malformed",
        reason: expect.stringContaining("<|tool_call>")
      })
    }
  })

  it("markers as the template writes them", () => {
    expect([gemma4.open, gemma4.close, gemma4.format]).toEqual(["<|tool_call>", "<tool_call|>", "gemma4"])
  })
})

describe("function_gemma", () => {
  it("parses call:NAME{k:<escape>v<escape>,n:3}", () => {
    expect(functionGemma.parse(`call:get_weather{city:${E}Tokyo${E},days:3}`, true, tools)).toEqual(
      calls([["get_weather", { city: "Tokyo", days: 3 }]])
    )
    expect(functionGemma.parse(`call:get_weather{tags:[${E}a,b${E}],metric:false}`, true, tools)).toEqual(
      calls([["get_weather", { tags: ["a,b"], metric: false }]])
    )
  })

  it("is malformed on a broken body", () => {
    expect(functionGemma.parse(`call:get_weather{city:${E}Tokyo}`, true, tools)).toMatchObject({
      _tag: "Malformed",
      reason: expect.stringContaining("<start_function_call>")
    })
  })

  it("markers as the docs write them", () => {
    expect([functionGemma.open, functionGemma.close]).toEqual(["<start_function_call>", "<end_function_call>"])
  })

  it("is linear on a huge string", () => {
    const big = "x".repeat(2_000_000)
    expect(functionGemma.parse(`call:get_weather{city:${E}${big}${E}}`, true, tools)).toEqual(
      calls([["get_weather", { city: big }]])
    )
  })
})
