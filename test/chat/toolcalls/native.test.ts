import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { newToolCallId, normaliseToolCalls } from "../../../src/chat/toolcalls/native.js"
import type { RequestTool } from "../../../src/chat/toolcalls/types.js"

const tools: ReadonlyArray<RequestTool> = [{ name: "get_weather" }, { name: "Search" }]

const counter = () => {
  let n = 0
  return () => `call_${String(++n).padStart(24, "0")}`
}

describe("newToolCallId", () => {
  it.prop(
    "is call_ and 24 chars of [A-Za-z0-9] for any random source",
    [fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1 })],
    ([values]) => {
      let i = 0
      expect(newToolCallId(() => values[i++ % values.length] ?? 0)).toMatch(/^call_[A-Za-z0-9]{24}$/)
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it("varies with the random source", () => {
    expect(newToolCallId(Math.random)).not.toBe(newToolCallId(Math.random))
  })
})

describe("normaliseToolCalls", () => {
  it("fills in missing and empty ids, keeps given ones, in order", () => {
    const out = normaliseToolCalls(
      [
        { name: "get_weather", arguments: "{}" },
        { id: "", name: "get_weather", arguments: "{}" },
        { id: "call_given", name: "get_weather", arguments: "{}" },
        { id: undefined, name: "get_weather", arguments: "{}" }
      ],
      tools,
      counter()
    )
    expect(out.map((c) => c.id)).toEqual([
      "call_000000000000000000000001",
      "call_000000000000000000000002",
      "call_given",
      "call_000000000000000000000003"
    ])
  })

  it("rewrites a name that matches a request tool case-insensitively, and keeps unknown names", () => {
    const out = normaliseToolCalls(
      [
        { name: "GET_WEATHER", arguments: "{}" },
        { name: "search", arguments: "{}" },
        { name: "other", arguments: "{}" }
      ],
      tools,
      counter()
    )
    expect(out.map((c) => c.name)).toEqual(["get_weather", "Search", "other"])
  })

  it("makes arguments JSON text: blank to {}, a double-encoded object decoded once, the rest as sent", () => {
    const args = ["", "  \n", "{\"a\":1}", JSON.stringify(JSON.stringify({ a: 1 })), "\"just text\"", "[1]", "{broken"]
    const out = normaliseToolCalls(args.map((a) => ({ name: "get_weather", arguments: a })), tools, counter())
    expect(out.map((c) => c.arguments)).toEqual(
      ["{}", "{}", "{\"a\":1}", "{\"a\":1}", "\"just text\"", "[1]", "{broken"]
    )
  })

  it.prop(
    "is idempotent",
    [
      fc.array(
        fc.record({ name: fc.constantFrom("get_weather", "SEARCH", "x"), arguments: fc.oneof(fc.json(), fc.string()) })
      )
    ],
    ([calls]) => {
      const once = normaliseToolCalls(calls, tools, counter())
      expect(normaliseToolCalls(once, tools, counter())).toEqual(once)
    },
    { fastCheck: { numRuns: 1000 } }
  )
})
