import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { parseBareJson } from "../../../src/chat/toolcalls/bareJson.js"
import { mistral } from "../../../src/chat/toolcalls/mistral.js"
import { mustache } from "../../../src/chat/toolcalls/mustache.js"
import { qwen3Xml } from "../../../src/chat/toolcalls/qwen3Xml.js"
import { typedValue } from "../../../src/chat/toolcalls/typedArgs.js"
import { registry } from "../../../src/chat/toolcalls/registry.js"
import type { RequestTool } from "../../../src/chat/toolcalls/types.js"
import { xml } from "../../../src/chat/toolcalls/xml.js"

const tools: ReadonlyArray<RequestTool> = [
  {
    name: "run",
    parameters: {
      type: "object",
      properties: {
        cmd: { type: "string" },
        n: { type: "integer" },
        ratio: { type: "number" },
        dry: { type: "boolean" },
        env: { type: "object" },
        args: { type: "array" },
        mode: { enum: ["1", "2"] },
        maybe: { type: ["integer", "null"] }
      }
    }
  },
  { name: "Get_Weather" }
]

const calls = (list: ReadonlyArray<readonly [string, unknown]>) => ({
  _tag: "Calls",
  calls: list.map(([name, args]) => ({ name, arguments: JSON.stringify(args) }))
})

/** Runs a scanned format's end detector over text; the index just past the block's end, or -1. */
const scanEnd = (text: string): number => {
  let s = mistral.start
  for (let i = 0; i < text.length; i++) {
    s = mistral.step(s, text.charCodeAt(i))
    if (mistral.done(s)) return i + 1
  }
  return -1
}

describe("xml (Hermes / Qwen2.5)", () => {
  it("parses a call, with whitespace around the JSON", () => {
    expect(xml.parse("\n  {\"name\": \"run\", \"arguments\": {\"cmd\": \"ls\"}}\n", true, tools)).toEqual(
      calls([["run", { cmd: "ls" }]])
    )
  })

  it("accepts arguments as a JSON string, parameters as an alias, and no arguments", () => {
    expect(xml.parse("{\"name\":\"run\",\"arguments\":\"{\\\"cmd\\\":\\\"ls\\\"}\"}", true, tools)).toEqual(
      calls([["run", { cmd: "ls" }]])
    )
    expect(xml.parse("{\"name\":\"run\",\"parameters\":{\"n\":1}}", true, tools)).toEqual(calls([["run", { n: 1 }]]))
    expect(xml.parse("{\"name\":\"run\"}", true, tools)).toEqual(calls([["run", {}]]))
    expect(xml.parse("{\"name\":\"run\",\"arguments\":\"  \"}", true, tools)).toEqual(calls([["run", {}]]))
  })

  it("accepts an array of calls and a Markdown fence", () => {
    expect(xml.parse("[{\"name\":\"a\"},{\"name\":\"b\",\"arguments\":{\"x\":1}}]", true, tools)).toEqual(
      calls([["a", {}], ["b", { x: 1 }]])
    )
    expect(xml.parse("```json\n{\"name\":\"run\"}\n```", true, tools)).toEqual(calls([["run", {}]]))
  })

  it("is malformed on broken JSON, no name, a non-object, or arguments that are not an object", () => {
    for (
      const body of [
        "{\"name\": \"run\", \"arguments\": {",
        "{\"arguments\": {}}",
        "{\"name\": \"\"}",
        "\"run\"",
        "[]",
        "",
        "{\"name\":\"run\",\"arguments\":[1]}",
        "{\"name\":\"run\",\"arguments\":\"not json\"}",
        "{\"name\":\"run\",\"arguments\":\"[1]\"}"
      ]
    ) {
      expect(xml.parse(body, true, tools)._tag).toBe("Malformed")
    }
  })
})

describe("mustache", () => {
  it("parses the same JSON body", () => {
    const body = " {\"name\":\"run\",\"arguments\":{\"n\":2}} "
    expect(mustache.parse(body, true, tools)).toEqual(calls([["run", { n: 2 }]]))
    expect(mustache.open).toBe("{{tool_call}}")
    expect(mustache.close).toBe("{{/tool_call}}")
  })
})

describe("qwen3_xml", () => {
  const block = (params: string) => `\n<function=run>\n${params}</function>\n`
  const param = (key: string, value: string) => `<parameter=${key}>\n${value}\n</parameter>\n`

  it("types values by the tool's schema", () => {
    const body = block(
      param("cmd", "42") + param("n", "7") + param("ratio", "0.5") + param("dry", "true") +
        param("env", "{\"A\": \"1\"}") + param("args", "[\"-l\", 2]") + param("mode", "1") + param("maybe", "null")
    )
    expect(qwen3Xml.parse(body, true, tools)).toEqual(
      calls([["run", {
        cmd: "42",
        n: 7,
        ratio: 0.5,
        dry: true,
        env: { A: "1" },
        args: ["-l", 2],
        mode: "1",
        maybe: null
      }]])
    )
  })

  it("keeps a string as written, trimmed of one newline each side", () => {
    const value = "\n  line one\n  line two  \n"
    expect(qwen3Xml.parse(block(param("cmd", value)), true, tools)).toEqual(calls([["run", { cmd: value }]]))
  })

  it("reads unknown parameters and tools as JSON, else as text", () => {
    expect(qwen3Xml.parse(block(param("x", "3") + param("y", "hi there") + param("z", "{\"a\":1}")), true, [])).toEqual(
      calls([["run", { x: 3, y: "hi there", z: { a: 1 } }]])
    )
  })

  it("keeps a value that does not fit its type as JSON or text, for validation to judge", () => {
    expect(typedValue("many", { type: "integer" })).toBe("many")
    expect(typedValue("yes", { type: "boolean" })).toBe("yes")
    expect(typedValue("[1", { type: "array" })).toBe("[1")
  })

  it("tolerates a missing </parameter> and a missing </function> in a closed block", () => {
    expect(qwen3Xml.parse("<function=run><parameter=n>1<parameter=cmd>ls</function>", true, tools)).toEqual(
      calls([["run", { n: 1, cmd: "ls" }]])
    )
    expect(qwen3Xml.parse("<function=run><parameter=n>1</parameter>", true, tools)).toEqual(calls([["run", { n: 1 }]]))
  })

  it("needs </function> in a block that never closed", () => {
    expect(qwen3Xml.parse("<function=run><parameter=n>1</parameter>", false, tools)._tag).toBe("Malformed")
    expect(qwen3Xml.parse("<function=run><parameter=n>1</parameter></function>", false, tools)._tag).toBe("Calls")
  })

  it("is malformed without a function name", () => {
    expect(qwen3Xml.parse("<function=>x</function>", true, tools)._tag).toBe("Malformed")
    expect(qwen3Xml.parse("<function=run", true, tools)._tag).toBe("Malformed")
  })

  it("claims bodies that start with <function=", () => {
    expect(qwen3Xml.claims("\n<Function=run>")).toBe(true)
    expect(qwen3Xml.claims("{\"name\":\"run\"}")).toBe(false)
  })
})

describe("mistral", () => {
  it("ends where the JSON array closes, ignoring brackets in strings", () => {
    const body = " [{\"name\":\"run\",\"arguments\":{\"cmd\":\"echo ] } [ \\\" ]\"}}]"
    expect(scanEnd(`${body} tail`)).toBe(body.length)
    expect(mistral.parse(body, true, tools)).toEqual(calls([["run", { cmd: "echo ] } [ \" ]" }]]))
  })

  it("parses several calls", () => {
    expect(mistral.parse("[{\"name\":\"a\",\"arguments\":{}},{\"name\":\"b\",\"arguments\":{\"x\":1}}]", true, tools))
      .toEqual(calls([["a", {}], ["b", { x: 1 }]]))
  })

  it("parses name[ARGS]{...}", () => {
    const body = "run[ARGS]{\"cmd\": \"}\"}"
    expect(scanEnd(`${body}[TOOL_CALLS]`)).toBe(body.length)
    expect(mistral.parse(body, true, tools)).toEqual(calls([["run", { cmd: "}" }]]))
  })

  it("never ends on a body that fits neither form, and such a body is malformed", () => {
    expect(scanEnd(" sorry, I cannot [x] {}")).toBe(-1)
    expect(scanEnd("run [ARGS]{}")).toBe(-1)
    expect(mistral.parse(" sorry", false, tools)._tag).toBe("Malformed")
    expect(mistral.parse("[{\"name\": }]", true, tools)._tag).toBe("Malformed")
    expect(mistral.parse("[]", true, tools)._tag).toBe("Malformed")
  })

  it.prop(
    "the end detector finds the end of any JSON array of call objects",
    [fc.array(fc.record({ name: fc.string({ minLength: 1 }), arguments: fc.dictionary(fc.string(), fc.jsonValue()) }))],
    ([list]) => {
      const json = JSON.stringify(list)
      expect(scanEnd(`${json}]}"x`)).toBe(json.length)
    },
    { fastCheck: { numRuns: 1000 } }
  )
})

describe("bare_json", () => {
  it("is a call only for a request tool's name with arguments", () => {
    expect(parseBareJson(" {\"name\":\"run\",\"arguments\":{\"n\":1}}\n", tools)).toEqual({
      name: "run",
      arguments: "{\"n\":1}"
    })
    expect(parseBareJson("{\"name\":\"get_weather\",\"parameters\":{}}", tools)).toEqual({
      name: "Get_Weather",
      arguments: "{}"
    })
    expect(parseBareJson("{\"name\":\"other\",\"arguments\":{}}", tools)).toBeUndefined()
    expect(parseBareJson("{\"name\":\"run\"}", tools)).toBeUndefined()
    expect(parseBareJson("{\"name\":\"run\",\"arguments\":{}} and more", tools)).toBeUndefined()
    expect(parseBareJson("[{\"name\":\"run\",\"arguments\":{}}]", tools)).toBeUndefined()
  })
})

describe("registry", () => {
  it("xml and qwen3_xml share one opener that tells them apart by the body", () => {
    const reg = registry(["xml", "qwen3_xml", "mustache", "mistral"])
    expect(reg.openers.map((o) => o.open)).toEqual(["<tool_call>", "{{tool_call}}", "[TOOL_CALLS]"])
    const tag = reg.openers[0]
    if (tag?._tag !== "Tag") return expect.unreachable()
    expect(tag.parse("{\"name\":\"run\"}", true, tools)).toEqual(calls([["run", {}]]))
    const qwen = "<function=run><parameter=n>2</parameter></function>"
    expect(tag.parse(qwen, true, tools)).toEqual(calls([["run", { n: 2 }]]))
  })

  it("enables only the formats asked for", () => {
    expect(registry(["mustache"]).openers.map((o) => o.open)).toEqual(["{{tool_call}}"])
    expect(registry(["bare_json"])).toMatchObject({ openers: [], bare: [{ format: "bare_json", first: 0x7b }] })
    expect(registry([]).bare).toEqual([])
  })
})
