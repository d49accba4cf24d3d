import { describe, expect, it } from "@effect/vitest"
import * as Holdback from "../../../src/chat/filters/holdback.js"
import { hy3 } from "../../../src/chat/toolcalls/hy3.js"
import { calls, type GenCall, options, streamingProperties, tools, written } from "./xmlArgsHarness.js"

const T = ":opensource>"
const call = (c: GenCall) =>
  `<tool_call${T}${c.name}<tool_sep${T}\n` +
  Object.entries(c.args).map(([k, v]) => `<arg_key${T}${k}</arg_key${T}\n<arg_value${T}${written(v)}</arg_value${T}\n`)
    .join("") +
  `</tool_call${T}\n`
const block = (list: ReadonlyArray<GenCall>) => `<tool_calls${T}\n${list.map(call).join("")}</tool_calls${T}`
const body = (list: ReadonlyArray<GenCall>) => `\n${list.map(call).join("")}`

const ARGS = { cmd: "x \"y\"\n😀 <z>", n: 0, env: { a: { b: [] } }, dry: false, maybe: 3 }

describe("hy3", () => {
  it("parses several calls, values typed by the schema", () => {
    expect(hy3.parse(body([{ name: "run", args: ARGS }, { name: "get_time", args: {} }]), true, tools)).toEqual(
      calls([["run", ARGS], ["get_time", {}]])
    )
  })

  it("a block cut off by the end of the stream must have finished its last value", () => {
    expect(hy3.parse(`\n<tool_call${T}run<tool_sep${T}<arg_key${T}n</arg_key${T}<arg_value${T}1`, false, tools)._tag)
      .toBe("Malformed")
    expect(Holdback.parseText(`a${block([{ name: "run", args: { n: 1 } }]).slice(0, -`</tool_calls${T}`.length)}`, options))
      .toMatchObject({ text: "a", calls: [{ name: "run", arguments: "{\"n\":1}" }], malformed: [] })
  })

  it("is malformed without a call or a name", () => {
    for (const b of ["", "run", `<tool_call${T}<tool_sep${T}</tool_call${T}`]) {
      expect(hy3.parse(b, true, tools)._tag).toBe("Malformed")
    }
  })

  describe("streaming", () => {
    streamingProperties(
      { block, perBlock: 3, markers: [`<tool_calls${T}`, `</tool_calls${T}`] },
      "Ok" + block([{ name: "run", args: ARGS }, { name: "get_time", args: {} }]) + " 😀"
    )
  })
})
