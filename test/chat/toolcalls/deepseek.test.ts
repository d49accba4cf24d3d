import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { deepseekV3 } from "../../../src/chat/toolcalls/deepseek.js"
import {
  anyCall,
  block,
  called,
  calls,
  expectEverySplit,
  familyProperties,
  MALFORMED,
  options,
  text,
  tools
} from "./holdbackHarness.js"

const OPEN = "<｜tool▁calls▁begin｜>"
const CLOSE = "<｜tool▁calls▁end｜>"
const BEGIN = "<｜tool▁call▁begin｜>"
const END = "<｜tool▁call▁end｜>"
const SEP = "<｜tool▁sep｜>"
const v3 = (name: string, args: unknown) => `${BEGIN}function${SEP}${name}\n\`\`\`json\n${JSON.stringify(args)}\n\`\`\`${END}`
const v31 = (name: string, args: unknown) => `${BEGIN}${name}${SEP}${JSON.stringify(args)}${END}`

const parse = (body: string, closed = true) => deepseekV3.parse(body, closed, tools)

describe("deepseek_v3", () => {
  it("parses V3 / R1 calls: type, name, fenced JSON", () => {
    expect(parse(v3("get_weather", { city: "Paris" }) + "\n" + v3("search", { query: "```é😀\n", n: { a: [1] } })))
      .toEqual(calls([["get_weather", { city: "Paris" }], ["search", { query: "```é😀\n", n: { a: [1] } }]]))
    expect(parse(`${BEGIN}function${SEP}search\n\`\`\`json\n{}\n\`\`\`${END}`)).toEqual(calls([["search", {}]]))
  })

  it("parses V3.1 calls: name, separator, JSON (or the JSON string the template's tojson makes)", () => {
    expect(parse(v31("get_weather", { city: "Paris" }) + v31("search", { query: "x" }))).toEqual(
      calls([["get_weather", { city: "Paris" }], ["search", { query: "x" }]])
    )
    expect(parse(`${BEGIN}search${SEP}"{\\"query\\": \\"y\\"}"${END}`)).toEqual(calls([["search", { query: "y" }]]))
    expect(parse(`${BEGIN}search${SEP}${END}`)).toEqual(calls([["search", {}]]))
  })

  it("tolerates a missing call end before the next call or the block's end", () => {
    expect(parse(`${BEGIN}a${SEP}{"x":1}${BEGIN}b${SEP}{}`)).toEqual(calls([["a", { x: 1 }], ["b", {}]]))
  })

  it("is malformed without calls, separator, name, or with broken JSON", () => {
    for (
      const body of ["", "text", `${BEGIN}search{}${END}`, `${BEGIN}${SEP}{}${END}`, `${BEGIN}a${SEP}{"x": ${END}`, `${BEGIN}function${SEP}a\n\`\`\`json\n[1]\n\`\`\`${END}`]
    ) {
      expect(parse(body)._tag).toBe("Malformed")
    }
  })

  it("at every split (fullwidth markers cut anywhere)", () => {
    expectEverySplit(
      `I'll check.${OPEN}${v3("get_weather", { city: "Zürich 😀" })}${CLOSE}`,
      options(["deepseek_v3"]),
      [text("I'll check."), called("get_weather", { city: "Zürich 😀" })]
    )
    expectEverySplit(`${OPEN}${v31("search", { query: "q" })}${v31("search", {})}${CLOSE} ok`, options(["deepseek_v3"]), [
      called("search", { query: "q" }),
      called("search", {}),
      text(" ok")
    ])
  })

  const blocks = fc.tuple(fc.array(anyCall, { minLength: 1, maxLength: 3 }), fc.boolean(), fc.constantFrom("", "\n"))
    .map(([list, isV31, between]) => {
      const body = list.map((c) => (isV31 ? v31 : v3)(c.name, c.args)).join(between)
      return block(`${OPEN}${body}${CLOSE}`, list.map((c) => called(c.name, c.args)), `${OPEN}${body}`)
    })
  const broken = fc.constantFrom(`${OPEN}${BEGIN}a${SEP}{"x": ${END}${CLOSE}`).map((m) => block(m, [MALFORMED]))
  familyProperties(
    "deepseek_v3",
    fc.oneof({ arbitrary: blocks, weight: 4 }, { arbitrary: broken, weight: 1 }),
    ["<｜tool▁calls", "<｜tool▁calls▁begin", "<｜tool▁call▁begin｜>", "<｜end▁of▁sentence｜>", "｜>"],
    /<｜tool▁calls▁begin$/
  )
})
