import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import type { ParsedToolCall, RequestTool, ToolChoiceMode } from "../../../src/chat/toolcalls/types.js"
import {
  choiceBinds,
  MAX_VALIDATED_ARGUMENT_BYTES,
  toolChoiceMode,
  validateToolCalls,
  validateToolChoice
} from "../../../src/chat/toolcalls/validate.js"

const weather: RequestTool = {
  name: "get_weather",
  parameters: {
    type: "object",
    properties: {
      city: { type: "string" },
      unit: { enum: ["c", "f"] },
      when: { type: "object", properties: { day: { type: "integer", minimum: 0 } }, required: ["day"] }
    },
    required: ["city"],
    additionalProperties: false
  }
}
const draft07: RequestTool = {
  name: "lookup",
  parameters: {
    $schema: "http://json-schema.org/draft-07/schema#",
    type: "object",
    definitions: { id: { type: "string", pattern: "^[a-z]+$" } },
    properties: { id: { $ref: "#/definitions/id" }, email: { type: "string", format: "email" } },
    required: ["id"]
  }
}
const withDefs: RequestTool = {
  name: "tree",
  parameters: {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    $defs: {
      node: {
        type: "object",
        properties: { value: { type: "number" }, children: { type: "array", items: { $ref: "#/$defs/node" } } },
        required: ["value"]
      }
    },
    $ref: "#/$defs/node"
  }
}
const free: RequestTool = { name: "anything" }
const tools = [weather, draft07, withDefs, free]

const auto: ToolChoiceMode = { _tag: "Auto" }
const c = (name: string, args: unknown): ParsedToolCall => ({ name, arguments: JSON.stringify(args) })
const check = (calls: ReadonlyArray<ParsedToolCall>, choice: ToolChoiceMode = auto, list = tools) =>
  validateToolCalls(calls, list, choice)
const reason = (calls: ReadonlyArray<ParsedToolCall>, choice: ToolChoiceMode = auto, list = tools) => {
  const verdict = check(calls, choice, list)
  return verdict._tag === "Invalid" ? verdict.reason : "valid"
}

describe("validateToolCalls", () => {
  it("accepts calls whose arguments fit their tool's schema", () => {
    expect(check([c("get_weather", { city: "Paris", unit: "c", when: { day: 1 } })])).toEqual({ _tag: "Valid" })
    expect(check([c("lookup", { id: "abc", email: "a@b.co" })])).toEqual({ _tag: "Valid" })
    expect(check([c("tree", { value: 1, children: [{ value: 2, children: [] }] })])).toEqual({ _tag: "Valid" })
    expect(check([c("anything", { x: [1] })])).toEqual({ _tag: "Valid" })
    expect(check([])).toEqual({ _tag: "Valid" })
  })

  it("names the tool, the JSON pointer and the keyword", () => {
    expect(reason([c("get_weather", { city: 1 })])).toBe("tool \"get_weather\": /city must be string (type)")
    expect(reason([c("get_weather", {})])).toBe("tool \"get_weather\": / must have required property 'city' (required)")
    expect(reason([c("get_weather", { city: "P", unit: "k" })])).toBe(
      "tool \"get_weather\": /unit must be equal to one of the allowed values: [\"c\",\"f\"] (enum)"
    )
    expect(reason([c("get_weather", { city: "P", when: { day: -1 } })])).toBe(
      "tool \"get_weather\": /when/day must be >= 0 (minimum)"
    )
    expect(reason([c("get_weather", { city: "P", when: {} })])).toContain(
      "/when must have required property 'day' (required)"
    )
    expect(reason([c("get_weather", { city: "P", x: 1 })])).toContain("must NOT have additional properties 'x'")
  })

  it("reads draft-07 schemas ($ref to definitions, formats)", () => {
    expect(reason([c("lookup", { id: "ABC" })])).toContain("/id must match pattern")
    expect(reason([c("lookup", { id: "abc", email: "nope" })])).toBe(
      "tool \"lookup\": /email must match format \"email\" (format)"
    )
  })

  it("reads 2020-12 schemas with $ref to $defs, recursively", () => {
    expect(reason([c("tree", { value: 1, children: [{ children: [] }] })])).toBe(
      "tool \"tree\": /children/0 must have required property 'value' (required)"
    )
  })

  it("rejects unknown tools, arguments that are not JSON, and arguments that are not an object", () => {
    expect(reason([c("nope", {})])).toBe("tool \"nope\" is not one of the request's tools")
    expect(reason([{ name: "anything", arguments: "{broken" }])).toContain("arguments are not valid JSON")
    expect(reason([{ name: "anything", arguments: "[1]" }])).toBe("tool \"anything\": arguments are not a JSON object")
  })

  it("reports the first invalid call", () => {
    expect(reason([c("anything", {}), c("get_weather", {}), c("nope", {})])).toContain("tool \"get_weather\"")
  })

  it("treats a schema that does not compile as the tool's fault, never a crash", () => {
    const broken: RequestTool = { name: "broken", parameters: { type: "strin" } }
    const badRef: RequestTool = { name: "badref", parameters: { $ref: "#/$defs/missing" } }
    for (const tool of [broken, badRef]) {
      expect(reason([c(tool.name, {})], auto, [tool])).toMatch(
        new RegExp(`^tool "${tool.name}": the tool's parameters schema is invalid`)
      )
    }
  })

  it("does not hang or crash on a $ref loop", () => {
    const loops: ReadonlyArray<RequestTool> = [
      { name: "self", parameters: { $defs: { a: { $ref: "#/$defs/a" } }, $ref: "#/$defs/a" } },
      {
        name: "pair",
        parameters: { $defs: { a: { $ref: "#/$defs/b" }, b: { $ref: "#/$defs/a" } }, $ref: "#/$defs/a" }
      },
      { name: "root", parameters: { type: "object", properties: { x: { $ref: "#" } }, $ref: "#" } }
    ]
    // No time budget: a self-referencing schema that looped would never return, and the runner's timeout fails it.
    for (const tool of loops) {
      for (let i = 0; i < 3; i++) expect(check([c(tool.name, { x: {} })], auto, [tool])._tag).toBe("Invalid")
    }
  })

  it("compiles each distinct schema once and keeps working past the cache size", () => {
    for (let i = 0; i < 300; i++) {
      const tool: RequestTool = { name: "t", parameters: { type: "object", properties: { v: { const: i } } } }
      expect(check([c("t", { v: i })], auto, [tool])._tag).toBe("Valid")
      expect(check([c("t", { v: i + 1 })], auto, [tool])._tag).toBe("Invalid")
    }
  })

  it("lets schemas of different requests share an $id", () => {
    const a: RequestTool = { name: "a", parameters: { $id: "https://x/s", type: "object", required: ["a"] } }
    const b: RequestTool = { name: "a", parameters: { $id: "https://x/s", type: "object", required: ["b"] } }
    expect(reason([c("a", { a: 1 })], auto, [a])).toBe("valid")
    expect(reason([c("a", { b: 1 })], auto, [b])).toBe("valid")
    expect(reason([c("a", { b: 1 })], auto, [a])).toContain("required property 'a'")
  })

  describe("tool_choice", () => {
    const ok = c("anything", {})
    it("none: any call is invalid", () => {
      expect(reason([ok], { _tag: "None" })).toBe("tool_choice is \"none\" but the response called tool \"anything\"")
      expect(check([], { _tag: "None" })._tag).toBe("Valid")
    })
    it("required: no call is invalid", () => {
      expect(reason([], { _tag: "Required" })).toBe("tool_choice is \"required\" but the response called no tool")
      expect(check([ok], { _tag: "Required" })._tag).toBe("Valid")
    })
    it("function: only that function, and at least one call", () => {
      const only: ToolChoiceMode = { _tag: "Function", name: "anything" }
      expect(check([ok, ok], only)._tag).toBe("Valid")
      expect(reason([ok, c("get_weather", { city: "P" })], only)).toContain("allows only tool \"anything\"")
      expect(reason([], only)).toContain("called no tool")
    })
    it("auto: anything valid goes", () => {
      expect(check([], auto)._tag).toBe("Valid")
      expect(check([ok], auto)._tag).toBe("Valid")
    })
  })

  describe("the tool to blame (what a replay is constrained to)", () => {
    const blamed = (calls: ReadonlyArray<ParsedToolCall>, choice: ToolChoiceMode = auto) => {
      const verdict = check(calls, choice)
      return verdict._tag === "Invalid" ? verdict.tool ?? "nobody" : "valid"
    }
    const named: ToolChoiceMode = { _tag: "Function", name: "get_weather" }
    it("invalid arguments of a call to a request tool: that tool", () => {
      expect(blamed([c("get_weather", { city: 1 })])).toBe("get_weather")
      expect(blamed([{ name: "lookup", arguments: "{not json" }])).toBe("lookup")
      expect(blamed([c("anything", [1])])).toBe("anything")
      // The first invalid call is to blame, after valid ones.
      expect(blamed([c("anything", {}), c("lookup", { id: "ABC" })])).toBe("lookup")
      expect(blamed([c("get_weather", { city: 1 })], { _tag: "Required" })).toBe("get_weather")
      expect(blamed([c("get_weather", { city: 1 })], named)).toBe("get_weather")
    })
    it("a tool whose schema does not compile is still the called tool's fault", () => {
      const broken: RequestTool = { name: "broken", parameters: { type: "object", properties: { a: { type: "nope" } } } }
      const verdict = validateToolCalls([c("broken", { a: 1 })], [broken], auto)
      expect(verdict._tag === "Invalid" && verdict.tool).toBe("broken")
    })
    it("a call to an undeclared tool, no call under required, any call under none: nobody", () => {
      expect(blamed([c("nope", {})])).toBe("nobody")
      expect(blamed([], { _tag: "Required" })).toBe("nobody")
      expect(blamed([c("get_weather", { city: "P" })], { _tag: "None" })).toBe("nobody")
    })
    it("under a named tool_choice, the named tool: no call, a call to another, arguments past the bound", () => {
      expect(blamed([], named)).toBe("get_weather")
      expect(blamed([c("anything", {})], named)).toBe("get_weather")
      expect(blamed([c("nope", {})], named)).toBe("get_weather")
      const huge = c("get_weather", { city: "x".repeat(MAX_VALIDATED_ARGUMENT_BYTES) })
      expect(blamed([huge], named)).toBe("get_weather")
      expect(blamed([huge])).toBe("nobody")
    })
    it.prop(
      "a blamed tool is always one of the request's tools, and the named one under a named tool_choice",
      [
        fc.array(
          fc.record({
            name: fc.constantFrom("get_weather", "lookup", "tree", "anything", "nope", "GET_WEATHER"),
            arguments: fc.oneof(fc.jsonValue().map((v) => JSON.stringify(v)), fc.string())
          }),
          { maxLength: 3 }
        ),
        fc.constantFrom<ToolChoiceMode>(auto, { _tag: "Required" }, { _tag: "None" }, named, { _tag: "Auto", allowedTools: true })
      ],
      ([calls, choice]) => {
        const verdict = check(calls, choice)
        if (verdict._tag === "Valid" || verdict.tool === undefined) return
        expect(tools.map((t) => t.name)).toContain(verdict.tool)
        if (choice._tag === "Function") expect(verdict.tool).toBe(choice.name)
        else expect(calls.map((call) => call.name)).toContain(verdict.tool)
      },
      { fastCheck: { numRuns: 1000 } }
    )
  })

  it.prop(
    "any JSON object validates against a tool without parameters; anything else does not",
    [fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue())],
    ([value]) => {
      const isObject = typeof value === "object" && value !== null && !Array.isArray(value)
      expect(check([{ name: "anything", arguments: JSON.stringify(value) }])._tag).toBe(isObject ? "Valid" : "Invalid")
    },
    { fastCheck: { numRuns: 1000 } }
  )
})

describe("validateToolChoice (every request, strict or not: no schemas)", () => {
  const calls = (...names: ReadonlyArray<string>) => names.map((name) => c(name, { any: "thing" }))
  const verdict = (names: ReadonlyArray<string>, choice: ToolChoiceMode) => {
    const v = validateToolChoice(calls(...names), choice, tools)
    return v._tag === "Invalid" ? v.reason : "valid"
  }
  it("plain auto lets anything through, a call to an undeclared tool too (strict mode refuses it)", () => {
    expect(verdict([], auto)).toBe("valid")
    expect(verdict(["nope"], auto)).toBe("valid")
  })
  it("required: at least one call, each to a request tool; arguments are not judged", () => {
    expect(verdict(["get_weather"], { _tag: "Required" })).toBe("valid")
    expect(verdict([], { _tag: "Required" })).toContain("called no tool")
    expect(verdict(["get_weather", "nope"], { _tag: "Required" })).toBe(
      "tool_choice is \"required\" but tool \"nope\" is not one of the request's tools"
    )
  })
  it("allowed_tools (auto): no call or calls to the request's tools (the allowed ones) only", () => {
    const allowed: ToolChoiceMode = { _tag: "Auto", allowedTools: true }
    expect(verdict([], allowed)).toBe("valid")
    expect(verdict(["lookup", "tree"], allowed)).toBe("valid")
    expect(verdict(["lookup", "shell"], allowed)).toBe("allowed_tools does not allow tool \"shell\"")
  })
})

describe("toolChoiceMode", () => {
  it("binds the answer unless it is plain auto", () => {
    expect(choiceBinds({ _tag: "Auto" })).toBe(false)
    for (const mode of [{ _tag: "Auto", allowedTools: true }, { _tag: "None" }, { _tag: "Required" }, { _tag: "Function", name: "f" }] as const) {
      expect(choiceBinds(mode)).toBe(true)
    }
  })
  it("decodes the request's tool_choice", () => {
    expect(toolChoiceMode("auto", true)).toEqual({ _tag: "Auto", allowedTools: true })
    expect(toolChoiceMode(undefined, true)).toEqual({ _tag: "Auto", allowedTools: true })
    expect(toolChoiceMode("required", true)).toEqual({ _tag: "Required" })
    expect(toolChoiceMode(undefined)).toEqual({ _tag: "Auto" })
    expect(toolChoiceMode("auto")).toEqual({ _tag: "Auto" })
    expect(toolChoiceMode("none")).toEqual({ _tag: "None" })
    expect(toolChoiceMode("required")).toEqual({ _tag: "Required" })
    expect(toolChoiceMode({ function: { name: "f" } })).toEqual({ _tag: "Function", name: "f" })
  })
})
