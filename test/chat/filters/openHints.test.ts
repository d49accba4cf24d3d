import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { buildHints, hintStep } from "../../../src/chat/filters/openHints.js"
import { lowerCode } from "../../../src/chat/toolcalls/block.js"

const fold = (s: string) => Array.from({ length: s.length }, (_, i) => String.fromCharCode(lowerCode(s.charCodeAt(i))))
  .join("")

/** What the automaton must say after `text`, computed the slow way. */
const naive = (hints: ReadonlyArray<string>, committed: ReadonlyArray<number>, text: string) => {
  const t = fold(text)
  const folded = hints.map(fold)
  let depth = 0
  let done = -1
  let doneLength = 0
  let danglingLength = 0
  folded.forEach((h, k) => {
    for (let d = Math.min(h.length, t.length); d > 0; d--) {
      if (!t.endsWith(h.slice(0, d))) continue
      depth = Math.max(depth, d)
      if (d === h.length && d > doneLength) {
        done = k
        doneLength = d
      }
      if (d >= (committed[k] ?? h.length)) danglingLength = Math.max(danglingLength, d)
      break
    }
  })
  return { depth, done, doneLength, danglingLength }
}

// A small alphabet (with a non-ASCII char and case) makes hints that overlap, nest and share prefixes common.
const alphabet = fc.constantFrom("<", "|", "t", "T", "_", ">", "｜", "a")
const hintSet = fc.array(fc.string({ unit: alphabet, minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 6 })
  .chain((hints) =>
    fc.tuple(fc.constant(hints), fc.tuple(...hints.map((h) => fc.integer({ min: 1, max: h.length }))))
  )

describe("open hint automaton", () => {
  it.prop(
    "after every char: depth = the longest suffix that starts a hint; the longest hint ending here; dangling",
    [hintSet, fc.string({ unit: alphabet, maxLength: 40 })],
    ([[hints, committed], text]) => {
      const a = buildHints(hints, committed)
      let node = 0
      for (let i = 0; i < text.length; i++) {
        node = hintStep(a, node, text.charCodeAt(i))
        const want = naive(hints, committed, text.slice(0, i + 1))
        expect(a.depth[node]).toBe(want.depth)
        const done = a.done[node] ?? -1
        expect(done < 0 ? 0 : hints[done]?.length).toBe(want.doneLength)
        if (done >= 0) expect(fold(hints[done] ?? "")).toBe(fold(hints[want.done] ?? ""))
        expect(a.danglingLength[node]).toBe(want.danglingLength)
        const dangling = a.dangling[node] ?? -1
        if (dangling >= 0) {
          expect(fold(text.slice(0, i + 1)).endsWith(fold(hints[dangling] ?? "").slice(0, want.danglingLength))).toBe(true)
        }
      }
    },
    { fastCheck: { numRuns: 2000 } }
  )

  it("matches hints in any ASCII case, other chars exactly, and skips prose at the root", () => {
    const a = buildHints(["<TOOL_call>", "<｜tool▁calls｜>"], [10, 3])
    const run = (text: string) => Array.from(text).reduce((node, ch) => hintStep(a, node, ch.charCodeAt(0)), 0)
    expect(a.done[run("x <tool_CALL>")]).toBe(0)
    expect(a.done[run("<｜TOOL▁CALLS｜>")]).toBe(1)
    expect(a.depth[run("<｜tool_")]).toBe(0)
    expect(a.root["a".charCodeAt(0)]).toBe(0)
    expect(a.root["<".charCodeAt(0)]).not.toBe(0)
  })
})
