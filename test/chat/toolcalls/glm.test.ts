import { describe, expect, it } from "@effect/vitest"
import * as Holdback from "../../../src/chat/filters/holdback.js"
import { glm45, glm47 } from "../../../src/chat/toolcalls/glm.js"
import { qwen3Xml } from "../../../src/chat/toolcalls/qwen3Xml.js"
import { registry } from "../../../src/chat/toolcalls/registry.js"
import { xml } from "../../../src/chat/toolcalls/xml.js"
import { calls, type GenCall, options, streamingProperties, tools, written } from "./xmlArgsHarness.js"

const block45 = (c: GenCall) =>
  `<tool_call>${c.name}\n` +
  Object.entries(c.args).map(([k, v]) => `<arg_key>${k}</arg_key>\n<arg_value>${written(v)}</arg_value>\n`).join("") +
  "</tool_call>"
const block47 = (c: GenCall) =>
  `<tool_call>${c.name}` +
  Object.entries(c.args).map(([k, v]) => `<arg_key>${k}</arg_key><arg_value>${written(v)}</arg_value>`).join("") +
  "</tool_call>"
const body = (markup: string) => markup.slice("<tool_call>".length, -"</tool_call>".length)

const ARGS = {
  cmd: "echo \"hi\" <b> & {x}\nnext line 😀",
  n: 7,
  ratio: 0.5,
  dry: false,
  env: { A: { deep: [1, "x"] } },
  args: ["-l", 2],
  mode: "1",
  maybe: null
}

describe("glm45 / glm47", () => {
  it("parses the templates' shapes, values typed by the schema", () => {
    for (const markup of [block45({ name: "run", args: ARGS }), block47({ name: "run", args: ARGS })]) {
      expect(glm45.parse(body(markup), true, tools)).toEqual(calls([["run", ARGS]]))
      expect(glm47.parse(body(markup), true, tools)).toEqual(calls([["run", ARGS]]))
    }
  })

  it("keeps strings as written (no entities, no trimming) and reads unknown tools by JSON guessing", () => {
    expect(glm47.parse("run<arg_key>cmd</arg_key><arg_value> 42 &amp; </arg_value>", true, tools)).toEqual(
      calls([["run", { cmd: " 42 &amp; " }]])
    )
    expect(glm47.parse("other<arg_key>x</arg_key><arg_value>3</arg_value><arg_key>y</arg_key><arg_value>hi</arg_value>", true, []))
      .toEqual(calls([["other", { x: 3, y: "hi" }]]))
    expect(glm47.parse("run<arg_key>n</arg_key><arg_value>many</arg_value>", true, tools)).toEqual(
      calls([["run", { n: "many" }]])
    )
  })

  it("a bare name is a call without arguments", () => {
    expect(glm45.parse("get_time\n", true, tools)).toEqual(calls([["get_time", {}]]))
  })

  it("tolerates missing </arg_key> and </arg_value> in a closed block", () => {
    expect(glm45.parse("run<arg_key>n<arg_value>1\n<arg_key>cmd</arg_key><arg_value>ls", true, tools)).toEqual(
      calls([["run", { n: 1, cmd: "ls" }]])
    )
  })

  it("a block cut off by the end of the stream must have finished its last value", () => {
    expect(glm45.parse("run\n<arg_key>n</arg_key>\n<arg_value>1</arg_value>\n", false, tools)).toEqual(
      calls([["run", { n: 1 }]])
    )
    expect(glm45.parse("run\n<arg_key>n</arg_key>\n<arg_value>1", false, tools)._tag).toBe("Malformed")
    expect(glm45.parse("get_ti", false, tools)._tag).toBe("Malformed")
    expect(Holdback.parseText("Hi <tool_call>run<arg_key>cmd</arg_key><arg_value>l", options)).toMatchObject({
      text: "Hi ",
      calls: [],
      malformed: [expect.any(String)]
    })
  })

  it("is malformed without a name, with a key without a value, or with an empty key", () => {
    for (const b of ["<arg_key>n</arg_key><arg_value>1</arg_value>", "run<arg_key>n</arg_key>", "run<arg_key> </arg_key><arg_value>1</arg_value>", "two words<arg_key>n</arg_key><arg_value>1</arg_value>"]) {
      expect(glm45.parse(b, true, tools)._tag).toBe("Malformed")
    }
  })

  it("claims exactly a name then <arg_key> or nothing, so xml and qwen3_xml keep their bodies", () => {
    expect(glm45.claims("\nrun\n<ARG_KEY>n</arg_key>")).toBe(true)
    expect(glm45.claims(" get_time \n")).toBe(true)
    for (const other of ["{\"name\":\"run\"}", "[{}]", "<function=run></function>", "42", "true", "run it", "", "run <x>"]) {
      expect(glm45.claims(other)).toBe(false)
    }
    expect(xml.claims("run<arg_key>")).toBe(false)
    expect(qwen3Xml.claims("run<arg_key>")).toBe(false)
  })

  it("shares the <tool_call> opener with xml and qwen3_xml, each body read by its own format", () => {
    const reg = registry(["xml", "qwen3_xml", "glm45", "glm47"])
    expect(reg.openers.map((o) => o.open)).toEqual(["<tool_call>"])
    const text = "A " + block47({ name: "run", args: { n: 1 } }) + " B <tool_call>{\"name\":\"get_time\"}</tool_call>" +
      "<tool_call><function=run><parameter=n>2</parameter></function></tool_call>"
    expect(Holdback.parseText(text, options)).toEqual({
      text: "A  B ",
      calls: [{ name: "run", arguments: "{\"n\":1}" }, { name: "get_time", arguments: "{}" }, {
        name: "run",
        arguments: "{\"n\":2}"
      }],
      malformed: []
    })
  })

  describe("streaming (4.5 form)", () => {
    streamingProperties(
      { block: (list) => list.map(block45).join(""), perBlock: 1, markers: ["<tool_call>", "</tool_call>"] },
      "Sure 😀 " + block45({ name: "run", args: ARGS }) + "\n" + block45({ name: "get_time", args: {} }) + " done"
    )
  })

  describe("streaming (4.7 form)", () => {
    streamingProperties(
      { block: (list) => list.map(block47).join(""), perBlock: 1, markers: ["<tool_call>", "</tool_call>"] },
      "é" + block47({ name: "run", args: ARGS }) + block47({ name: "get_time", args: {} }) + "<tool_c"
    )
  })
})
