import { describe, expect, it } from "@effect/vitest"
import * as Holdback from "../../../src/chat/filters/holdback.js"
import { minimaxM2 } from "../../../src/chat/toolcalls/minimaxM2.js"
import { calls, type GenCall, options, streamingProperties, tools, written } from "./xmlArgsHarness.js"

const invoke = (c: GenCall) =>
  `<invoke name="${c.name}">\n` +
  Object.entries(c.args).map(([k, v]) => `<parameter name="${k}">${written(v)}</parameter>\n`).join("") +
  "</invoke>\n"
const block = (list: ReadonlyArray<GenCall>) => `<minimax:tool_call>\n${list.map(invoke).join("")}</minimax:tool_call>`
const body = (list: ReadonlyArray<GenCall>) => `\n${list.map(invoke).join("")}`

const ARGS = { cmd: "say \"hi\" <b> &amp;\n😀", n: -3, env: { a: [1, { b: null }] }, args: [], dry: true, maybe: null }

describe("minimax_m2", () => {
  it("parses several invokes in one block, values typed by the schema, strings as written", () => {
    expect(minimaxM2.parse(body([{ name: "run", args: ARGS }, { name: "get_time", args: {} }]), true, tools)).toEqual(
      calls([["run", ARGS], ["get_time", {}]])
    )
  })

  it("reads single quotes and any case, and unknown tools by JSON guessing", () => {
    expect(minimaxM2.parse("<INVOKE name='x'><Parameter Name='k'>[1]</PARAMETER></invoke>", true, [])).toEqual(
      calls([["x", { k: [1] }]])
    )
  })

  it("tolerates missing </parameter> and </invoke> in a closed block", () => {
    const b = "<invoke name=\"run\"><parameter name=\"n\">1<parameter name=\"cmd\">ls</parameter>" +
      "<invoke name=\"get_time\">"
    expect(minimaxM2.parse(b, true, tools)).toEqual(calls([["run", { n: 1, cmd: "ls" }], ["get_time", {}]]))
  })

  it("a block cut off by the end of the stream must have finished its last invoke", () => {
    expect(minimaxM2.parse(body([{ name: "run", args: { n: 1 } }]), false, tools)).toEqual(calls([["run", { n: 1 }]]))
    expect(minimaxM2.parse("<invoke name=\"run\"><parameter name=\"n\">1", false, tools)._tag).toBe("Malformed")
    expect(Holdback.parseText("x <minimax:tool_call>\n<invoke name=\"run\">", options)).toMatchObject({
      text: "x ",
      calls: [],
      malformed: [expect.any(String)]
    })
    expect(Holdback.parseText("x <minimax:tool_call", options).malformed).toHaveLength(1)
  })

  it("is malformed without an invoke, a name, or an argument name", () => {
    for (const b of ["", "hello", "<invoke>x</invoke>", "<invoke name=\"\"></invoke>", "<invoke name=\"run\"><parameter>1</parameter></invoke>", "<invoke name=\"run\""]) {
      expect(minimaxM2.parse(b, true, tools)._tag).toBe("Malformed")
    }
  })

  describe("streaming", () => {
    streamingProperties(
      { block, perBlock: 3, markers: ["<minimax:tool_call>", "</minimax:tool_call>"] },
      "Let me 😀 check." + block([{ name: "run", args: ARGS }, { name: "get_time", args: {} }]) + "\nDone <minimax:tool"
    )
  })
})
