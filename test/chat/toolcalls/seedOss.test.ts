import { describe, expect, it } from "@effect/vitest"
import * as Holdback from "../../../src/chat/filters/holdback.js"
import { seedOss } from "../../../src/chat/toolcalls/seedOss.js"
import { calls, type GenCall, options, streamingProperties, tools, written } from "./xmlArgsHarness.js"

const fn = (c: GenCall) =>
  `\n<function=${c.name}>\n` +
  Object.entries(c.args).map(([k, v]) => `<parameter=${k}>${written(v)}</parameter>\n`).join("") +
  "</function>\n"
const block = (list: ReadonlyArray<GenCall>) => list.map((c) => `<seed:tool_call>${fn(c)}</seed:tool_call>`).join("")

const ARGS = { cmd: "multi\nline \"v\" {x} 😀", n: 12, ratio: -0.25, env: { k: "v" }, args: [1, [2]], mode: "2" }

describe("seed_oss", () => {
  it("parses the template's block, values typed by the schema", () => {
    expect(seedOss.parse(fn({ name: "run", args: ARGS }), true, tools)).toEqual(calls([["run", ARGS]]))
  })

  it("reads several functions in one block and a function without parameters", () => {
    expect(seedOss.parse(fn({ name: "run", args: { n: 1 } }) + fn({ name: "get_time", args: {} }), true, tools))
      .toEqual(calls([["run", { n: 1 }], ["get_time", {}]]))
  })

  it("keeps a string as written, newlines included", () => {
    expect(seedOss.parse("<function=run><parameter=cmd>\n a \n</parameter></function>", true, tools)).toEqual(
      calls([["run", { cmd: "\n a \n" }]])
    )
  })

  it("reads Python-style booleans (`| string` in the template) for a boolean parameter", () => {
    expect(seedOss.parse("<function=run><parameter=dry>True</parameter></function>", true, tools)).toEqual(
      calls([["run", { dry: true }]])
    )
  })

  it("tolerates missing close tags in a closed block; needs </function> at the end of the stream", () => {
    expect(seedOss.parse("<function=run><parameter=n>1<parameter=cmd>ls", true, tools)).toEqual(
      calls([["run", { n: 1, cmd: "ls" }]])
    )
    expect(seedOss.parse("<function=run><parameter=n>1</parameter>", false, tools)._tag).toBe("Malformed")
    expect(Holdback.parseText("a <seed:tool_call><function=run><parameter=n>1", options).malformed).toHaveLength(1)
  })

  it("is malformed without a function or a name", () => {
    for (const b of ["", "{\"name\":\"run\"}", "<function=></function>", "<function=run"]) {
      expect(seedOss.parse(b, true, tools)._tag).toBe("Malformed")
    }
  })

  describe("streaming", () => {
    streamingProperties(
      { block, perBlock: 2, markers: ["<seed:tool_call>", "</seed:tool_call>"] },
      "Sure." + block([{ name: "run", args: ARGS }, { name: "get_time", args: {} }]) + " ok <seed:tool"
    )
  })
})
