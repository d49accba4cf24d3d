import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { llamacppEnvelope as envelope } from "../../../src/chat/toolcalls/llamacppEnvelope.js"
import { anyCall, call, tools } from "./holdbackHarness.js"

/** Scans a response as the hold-back would: "done" with the index just past the shape, "dead" where it died. */
const scan = (response: string): { readonly at: "done" | "dead" | "open"; readonly index: number } => {
  const first = response.search(/\S/)
  if (first < 0 || response.charCodeAt(first) !== envelope.first) return { at: "dead", index: Math.max(first, 0) }
  let s = envelope.start
  for (let i = first + 1; i < response.length; i++) {
    s = envelope.step(s, response.charCodeAt(i))
    if (envelope.dead(s)) return { at: "dead", index: i }
    if (envelope.done(s)) return { at: "done", index: i + 1 }
  }
  return { at: "open", index: response.length }
}

describe("llamacpp_envelope", () => {
  const one = "{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"} ] \\\" {\"}}}"
  const many = "{ \"tool_calls\" : [{\"name\": \"search\", \"arguments\": {\"query\": \"é😀\\n\"}, \"id\": \"0\"}, " +
    "{\"name\": \"get_weather\", \"arguments\": {}}] }"

  it("parses one call or a list of calls naming request tools, by the tool's declared name", () => {
    expect(envelope.parse(one, tools)).toEqual([call("get_weather", { city: "} ] \" {" })])
    expect(envelope.parse(`\n${many}\n`, tools)).toEqual([call("search", { query: "é😀\n" }), call("get_weather", {})])
    expect(envelope.parse("{\"tool_call\": {\"name\": \"SEARCH\"}}", tools)).toEqual([call("search", {})])
    expect(envelope.parse("{\"tool_call\": {\"name\": \"search\", \"arguments\": \"{\\\"query\\\": \\\"x\\\"}\"}}", tools))
      .toEqual([call("search", { query: "x" })])
  })

  it("is text for an undeclared tool, a response, other keys, bad arguments, or not JSON", () => {
    for (
      const t of [
        "{\"tool_call\": {\"name\": \"other\", \"arguments\": {}}}",
        "{\"tool_calls\": [{\"name\": \"search\"}, {\"name\": \"other\"}]}",
        "{\"tool_calls\": []}",
        "{\"response\": \"Hello\"}",
        "{\"tool_call\": {\"name\": \"search\"}, \"response\": \"x\"}",
        "{\"tool_call\": {\"name\": \"search\", \"arguments\": [1]}}",
        "{\"tool_call\": [{\"name\": \"search\"}]}",
        "{\"tool_call\": {\"name\": \"search\"}} more",
        "{\"tool_call\": "
      ]
    ) {
      expect(envelope.parse(t, tools)).toBeUndefined()
    }
  })

  it("the scan ends where the envelope closes, brackets in strings aside", () => {
    expect(scan(one)).toEqual({ at: "done", index: one.length })
    expect(scan(`  ${many}  `)).toEqual({ at: "done", index: many.length + 2 })
    expect(scan(one.slice(0, -1))).toEqual({ at: "open", index: one.length - 1 })
  })

  it("the scan dies as soon as the text cannot be an envelope", () => {
    expect(scan("{\"response\": \"hi\"}")).toEqual({ at: "dead", index: 2 })
    expect(scan("{\"tool_callx\": {}}")).toEqual({ at: "dead", index: 11 })
    expect(scan("{\"tool_call\" = 1}")).toEqual({ at: "dead", index: 13 })
    expect(scan("{\"tool_call\": 3}")).toEqual({ at: "dead", index: 14 })
    expect(scan("{x} is a set")).toEqual({ at: "dead", index: 1 })
    expect(scan("Hello")).toEqual({ at: "dead", index: 0 })
  })

  it("after the envelope closes only whitespace keeps it done", () => {
    let s = envelope.start
    for (const ch of one.slice(1)) s = envelope.step(s, ch.charCodeAt(0))
    expect(envelope.done(s)).toBe(true)
    expect(envelope.done(envelope.step(s, 0x0a))).toBe(true)
    expect(envelope.dead(envelope.step(s, 0x61))).toBe(true)
  })

  it.prop(
    "any list of calls in either shape scans to its end and parses back",
    [fc.array(anyCall, { minLength: 1, maxLength: 4 }), fc.boolean(), fc.constantFrom("", " ", "\n  ")],
    ([list, single, ws]) => {
      const calls = list.map((c) => ({ name: c.name, arguments: c.args }))
      const json = single
        ? `{${ws}"tool_call"${ws}:${ws}${JSON.stringify(calls[0])}${ws}}`
        : `{${ws}"tool_calls":${ws}${JSON.stringify(calls)}}`
      expect(scan(`${ws}${json}${ws}`)).toEqual({ at: "done", index: ws.length + json.length })
      const expected = (single ? list.slice(0, 1) : list).map((c) => call(c.name, c.args))
      expect(envelope.parse(`${ws}${json}${ws}`, tools)).toEqual(expected)
    },
    { fastCheck: { numRuns: 500 } }
  )
})
