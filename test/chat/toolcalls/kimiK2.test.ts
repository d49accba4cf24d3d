import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { kimiK2, kimiToolName } from "../../../src/chat/toolcalls/kimiK2.js"
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
  stream,
  text,
  tools
} from "./holdbackHarness.js"

const OPEN = "<|tool_calls_section_begin|>"
const CLOSE = "<|tool_calls_section_end|>"
const kimiCall = (name: string, index: number, args: unknown) =>
  `<|tool_call_begin|>functions.${name}:${index}<|tool_call_argument_begin|>${JSON.stringify(args)}<|tool_call_end|>`

const parse = (body: string, closed = true) => kimiK2.parse(body, closed, tools)

describe("kimi_k2", () => {
  it("names a call by its id functions.NAME:INDEX", () => {
    expect(kimiToolName("functions.get_weather:0")).toBe("get_weather")
    expect(kimiToolName("functions.a.b:12")).toBe("a.b")
    expect(kimiToolName("search")).toBe("search")
    expect(kimiToolName("ns:tool")).toBe("ns:tool")
  })

  it("parses the template's calls", () => {
    expect(parse(kimiCall("get_weather", 0, { city: "Paris" }) + kimiCall("search", 1, { query: "\"é😀\n", n: { a: [] } })))
      .toEqual(calls([["get_weather", { city: "Paris" }], ["search", { query: "\"é😀\n", n: { a: [] } }]]))
    expect(parse("<|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>{}<|tool_call_end|>")).toEqual(
      calls([["search", {}]])
    )
  })

  it("is malformed without calls, argument marker, name, or with broken JSON", () => {
    for (
      const body of [
        "",
        "<|tool_call_begin|>functions.a:0{}<|tool_call_end|>",
        "<|tool_call_begin|>functions.:0<|tool_call_argument_begin|>{}<|tool_call_end|>",
        "<|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{\"x\"<|tool_call_end|>"
      ]
    ) {
      expect(parse(body)._tag).toBe("Malformed")
    }
  })

  it("at every split", () => {
    expectEverySplit(
      `Let me search.${OPEN}${kimiCall("search", 0, { query: "x" })}${kimiCall("get_weather", 1, { city: "P" })}${CLOSE}`,
      options(["kimi_k2"]),
      [text("Let me search."), called("search", { query: "x" }), called("get_weather", { city: "P" })]
    )
  })

  it("is linear: 20,000 calls in one block, and a 2 MB argument, in 4-char deltas", () => {
    const many = Array.from({ length: 20_000 }, (_, i) => kimiCall("search", i, { query: String(i) })).join("")
    const big = kimiCall("search", 0, { query: "x".repeat(2_000_000) })
    for (const [body, count] of [[many, 20_000], [big, 1]] as const) {
      const t = `${OPEN}${body}${CLOSE}`
      const chunks: Array<string> = []
      for (let i = 0; i < t.length; i += 4) chunks.push(t.slice(i, i + 4))
      const events = stream(chunks, options(["kimi_k2"]))
      expect(events.filter((e) => e._tag === "Call" && e.call.name === "search")).toHaveLength(count)
    }
  })

  const blocks = fc
    .tuple(randomCase(OPEN), randomCase(CLOSE), fc.array(anyCall, { minLength: 1, maxLength: 3 }))
    .map(([open, close, list]) => {
      const body = list.map((c, i) => kimiCall(c.name, i, c.args)).join("")
      return block(`${open}${body}${close}`, list.map((c) => called(c.name, c.args)), `${open}${body}`)
    })
  const broken = fc.constantFrom(`${OPEN}<|tool_call_begin|>functions.a:0{}<|tool_call_end|>${CLOSE}`).map((m) =>
    block(m, [MALFORMED])
  )
  familyProperties(
    "kimi_k2",
    fc.oneof({ arbitrary: blocks, weight: 4 }, { arbitrary: broken, weight: 1 }),
    ["<|tool_calls_section", "<|tool_calls_section_begin", "<|tool_call_begin|>", "<|tool_calls_section_end|>", "<|im_end|>"],
    /<\|tool_calls_section_begin\|$/i
  )
})
