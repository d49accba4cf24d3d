import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as F from "../../../src/chat/filters/functionaryV32.js"
import { splitAt } from "../../support/holdbackSplits.js"

/** Functionary v3.2's recipient lines (`meetkai-functionary-medium-v3.2.jinja`), at every split. */

interface Seen {
  readonly content: string
  readonly calls: ReadonlyArray<readonly [string, string]>
  readonly malformed: number
}

const run = (chunks: ReadonlyArray<string>, cutOff = false): Seen => {
  let state = F.initial
  const out: Array<F.FunctionaryOutput> = []
  for (const chunk of chunks) {
    const [next, o] = F.append(state, chunk)
    state = next
    out.push(...o)
  }
  out.push(...F.flush(state, cutOff))
  for (const o of out) if (o._tag === "Content") expect(o.text).not.toBe("")
  return {
    content: out.flatMap((o) => (o._tag === "Content" ? [o.text] : [])).join(""),
    calls: out.flatMap((o) => (o._tag === "Call" ? [[o.call.name, o.call.arguments] as const] : [])),
    malformed: out.filter((o) => o._tag === "Malformed").length
  }
}

const CASES: ReadonlyArray<readonly [string, Seen]> = [
  ["all\nHello there.", { content: "Hello there.", calls: [], malformed: 0 }],
  ["get_weather\n{\"city\": \"Oslo\"}", { content: "", calls: [["get_weather", "{\"city\":\"Oslo\"}"]], malformed: 0 }],
  [
    "all\nLet me look.>>>get_weather\n{\"city\": \"Oslo\"}>>>get_time\n{}",
    { content: "Let me look.", calls: [["get_weather", "{\"city\":\"Oslo\"}"], ["get_time", "{}"]], malformed: 0 }
  ],
  ["all\nUse `a >> b` and `x > y`.", { content: "Use `a >> b` and `x > y`.", calls: [], malformed: 0 }],
  ["all\nA REPL: >>> print(1)\ndone", { content: "A REPL: >>> print(1)\ndone", calls: [], malformed: 0 }],
  ["get_weather\n{oops", { content: "", calls: [], malformed: 1 }],
  // Not this format at all: the first line is not a recipient.
  ["Hello there.\nget_weather\n{}", { content: "Hello there.\nget_weather\n{}", calls: [], malformed: 0 }],
  ["get_time\r\n{}", { content: "", calls: [["get_time", "{}"]], malformed: 0 }]
]

describe("Functionary v3.2 recipient lines", () => {
  it.each(CASES)("%j", (text, seen) => {
    expect(run([text])).toEqual(seen)
  })

  it("every split of every case gives the same", () =>
    fc.assert(
      fc.property(fc.constantFrom(...CASES), fc.array(fc.nat(), { maxLength: 8 }), ([text, seen], cuts) => {
        expect(run(splitAt(text, cuts))).toEqual(seen)
      })
    ))

  it("one code unit at a time", () => {
    for (const [text, seen] of CASES) expect(run(text.split(""))).toEqual(seen)
  })

  it("cut off by the token limit: a partial marker or recipient is dropped, no call made of it", () => {
    expect(run(["all\nLet me look.>>"], true)).toEqual({ content: "Let me look.", calls: [], malformed: 0 })
    expect(run(["all\nLet me look.>>>get"], true)).toEqual({ content: "Let me look.", calls: [], malformed: 0 })
    expect(run(["al"], true)).toEqual({ content: "", calls: [], malformed: 0 })
  })

  it("an answer that is not this format is decided at its first char that cannot be a name", () => {
    const [state, out] = F.append(F.initial, "Hello ")
    expect(state._tag).toBe("Passing")
    expect(out).toEqual([{ _tag: "Content", text: "Hello " }])
    expect(F.engaged(state)).toBe(false)
  })
})
