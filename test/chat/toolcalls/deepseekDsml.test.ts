import { describe, expect, it } from "@effect/vitest"
import * as Holdback from "../../../src/chat/filters/holdback.js"
import { deepseekV32, deepseekV4 } from "../../../src/chat/toolcalls/deepseekDsml.js"
import { calls, type GenCall, options, streamingProperties, tools } from "./xmlArgsHarness.js"

const D = "｜DSML｜"
const invoke = (c: GenCall) =>
  `<${D}invoke name="${c.name}">\n` +
  Object.entries(c.args).map(([k, v]) =>
    typeof v === "string"
      ? `<${D}parameter name="${k}" string="true">${v}</${D}parameter>\n`
      : `<${D}parameter name="${k}" string="false">${JSON.stringify(v)}</${D}parameter>\n`
  ).join("") +
  `</${D}invoke>\n`
const block = (outer: string) => (list: ReadonlyArray<GenCall>) =>
  `<${D}${outer}>\n${list.map(invoke).join("")}</${D}${outer}>`
const body = (list: ReadonlyArray<GenCall>) => `\n${list.map(invoke).join("")}`

const ARGS = { cmd: "a \"q\" {1}\n😀", n: 5, env: { x: [true] }, args: ["s"], dry: false, maybe: null }

describe("deepseek_v32 / deepseek_v4 (DSML)", () => {
  it("parses several invokes, honouring the string attribute", () => {
    expect(deepseekV32.parse(body([{ name: "run", args: ARGS }, { name: "get_time", args: {} }]), true, tools))
      .toEqual(calls([["run", ARGS], ["get_time", {}]]))
    expect(deepseekV4.parse(body([{ name: "run", args: ARGS }]), true, tools)).toEqual(calls([["run", ARGS]]))
  })

  it("string=\"true\" is text even where the schema wants a number; string=\"false\" is JSON", () => {
    const b = `<${D}invoke name="run"><${D}parameter name="n" string="true">5</${D}parameter>` +
      `<${D}parameter name="cmd" string="false">"quoted"</${D}parameter>` +
      `<${D}parameter name="x" string="false">{"a": 1}</${D}parameter></${D}invoke>`
    expect(deepseekV32.parse(b, true, tools)).toEqual(calls([["run", { n: "5", cmd: "quoted", x: { a: 1 } }]]))
  })

  it("string=\"false\" that is not JSON, or no attribute, is typed by the schema", () => {
    const b = `<${D}invoke name="run"><${D}parameter name="cmd" string="false">ls -l</${D}parameter>` +
      `<${D}parameter name="n">9</${D}parameter></${D}invoke>`
    expect(deepseekV32.parse(b, true, tools)).toEqual(calls([["run", { cmd: "ls -l", n: 9 }]]))
  })

  it("a block cut off by the end of the stream must have finished its last invoke", () => {
    expect(deepseekV32.parse(`<${D}invoke name="run"><${D}parameter name="n" string="false">1`, false, tools)._tag)
      .toBe("Malformed")
    expect(Holdback.parseText(`Hi<${D}function_calls>\n<${D}invoke name="run">`, options)).toMatchObject({
      text: "Hi",
      calls: [],
      malformed: [expect.any(String)]
    })
  })

  it("is malformed without an invoke or a name", () => {
    for (const b of ["", "<invoke name=\"run\"></invoke>", `<${D}invoke></${D}invoke>`]) {
      expect(deepseekV32.parse(b, true, tools)._tag).toBe("Malformed")
    }
  })

  describe("streaming (V3.2)", () => {
    streamingProperties(
      { block: block("function_calls"), perBlock: 3, markers: [`<${D}function_calls>`, `</${D}function_calls>`] },
      "Ok 😀" + block("function_calls")([{ name: "run", args: ARGS }, { name: "get_time", args: {} }]) + `<${D}fun`
    )
  })

  describe("streaming (V4)", () => {
    streamingProperties(
      { block: block("tool_calls"), perBlock: 3, markers: [`<${D}tool_calls>`, `</${D}tool_calls>`] },
      "é" + block("tool_calls")([{ name: "run", args: ARGS }]) + " end"
    )
  })
})
