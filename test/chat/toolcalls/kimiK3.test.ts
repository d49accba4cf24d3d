import { describe, expect, it } from "@effect/vitest"
import * as Holdback from "../../../src/chat/filters/holdback.js"
import { kimiK3 } from "../../../src/chat/toolcalls/kimiK3.js"
import { calls, type GenCall, options, streamingProperties, tools, written } from "./xmlArgsHarness.js"

const esc = (v: string) => v.replace(/&/g, "&amp;").replace(/"/g, "&quot;")
const typeOf = (v: unknown) =>
  typeof v === "boolean" ? "boolean" : v === null ? "null" : typeof v === "number" ? "number" :
  typeof v === "string" ? "string" : Array.isArray(v) ? "array" : "object"
const call = (c: GenCall, i: number) =>
  `<|open|>call tool="${esc(c.name)}" index="${i + 1}"<|sep|>` +
  Object.entries(c.args).map(([k, v]) =>
    `<|open|>argument key="${esc(k)}" type="${typeOf(v)}"<|sep|>${written(v)}<|close|>argument<|sep|>`
  ).join("") +
  "<|close|>call<|sep|>"
const block = (list: ReadonlyArray<GenCall>) => `<|open|>tools<|sep|>${list.map(call).join("")}<|close|>tools<|sep|>`
const body = (list: ReadonlyArray<GenCall>) => list.map(call).join("")

const ARGS = { cmd: "<b> \"x\" & y\n😀", n: 3, ratio: 1.5, dry: true, env: { a: null }, args: [1, "2"], maybe: null }

describe("kimi_k3", () => {
  it("parses several calls, values read by their declared type", () => {
    expect(kimiK3.parse(body([{ name: "run", args: ARGS }, { name: "get_time", args: {} }]), true, tools)).toEqual(
      calls([["run", ARGS], ["get_time", {}]])
    )
  })

  it("decodes &amp; and &quot; in attributes, not in values", () => {
    const b = "<|open|>call tool=\"a&amp;b\" index=\"1\"<|sep|><|open|>argument key=\"k&quot;\" type=\"string\"<|sep|>" +
      "&amp;<|close|>argument<|sep|><|close|>call<|sep|>"
    expect(kimiK3.parse(b, true, [])).toEqual(calls([["a&b", { "k\"": "&amp;" }]]))
  })

  it("type=\"string\" keeps text even where the schema wants a number; no type falls back to the schema", () => {
    const b = "<|open|>call tool=\"run\"<|sep|><|open|>argument key=\"n\" type=\"string\"<|sep|>4<|close|>argument<|sep|>" +
      "<|open|>argument key=\"ratio\"<|sep|>2<|close|>argument<|sep|><|close|>call<|sep|>"
    expect(kimiK3.parse(b, true, tools)).toEqual(calls([["run", { n: "4", ratio: 2 }]]))
  })

  it("reads the whole-object json form", () => {
    const b = "<|open|>call tool=\"run\" index=\"1\"<|sep|><|open|>json type=\"object\"<|sep|>{\"n\": 1, \"cmd\": \"x\"}" +
      "<|close|>json<|sep|><|close|>call<|sep|>"
    expect(kimiK3.parse(b, true, tools)).toEqual(calls([["run", { n: 1, cmd: "x" }]]))
    expect(kimiK3.parse(b.replace("{\"n\"", "[{\"n\""), true, tools)._tag).toBe("Malformed")
  })

  it("a block cut off by the end of the stream must have finished its last call", () => {
    expect(Holdback.parseText("Hi<|open|>tools<|sep|><|open|>call tool=\"run\"<|sep|>", options)).toMatchObject({
      text: "Hi",
      calls: [],
      malformed: [expect.any(String)]
    })
    expect(Holdback.parseText(`Hi${block([{ name: "get_time", args: {} }]).slice(0, -"<|close|>tools<|sep|>".length)}`, options))
      .toMatchObject({ text: "Hi", calls: [{ name: "get_time", arguments: "{}" }], malformed: [] })
  })

  it("is malformed without a call or a tool name", () => {
    for (const b of ["", "<|open|>call<|sep|><|close|>call<|sep|>", "<|open|>call tool=\"run\""]) {
      expect(kimiK3.parse(b, true, tools)._tag).toBe("Malformed")
    }
  })

  describe("streaming", () => {
    streamingProperties(
      { block, perBlock: 3, markers: ["<|open|>tools<|sep|>", "<|close|>tools<|sep|>"] },
      "Sure 😀" + block([{ name: "run", args: ARGS }, { name: "get_time", args: {} }]) + "<|open|>tool"
    )
  })
})
