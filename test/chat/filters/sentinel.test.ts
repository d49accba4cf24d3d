import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Harmony from "../../../src/chat/filters/harmony.js"
import * as Sentinel from "../../../src/chat/filters/sentinel.js"
import * as Think from "../../../src/chat/filters/think.js"
import { splitAt } from "../../support/splits.js"

const run = (sentinels: ReadonlyArray<string>, chunks: ReadonlyArray<string>): string => {
  let state = Sentinel.initial(sentinels)
  let out = ""
  for (const chunk of chunks) {
    const [next, emitted] = Sentinel.append(state, chunk)
    state = next
    out += emitted
  }
  return out + Sentinel.flush(state)
}

/** Non-streaming reference: everything before the earliest sentinel. */
const reference = (sentinels: ReadonlyArray<string>, text: string): string => {
  const ends = sentinels.filter((s) => s !== "").map((s) => text.indexOf(s)).filter((i) => i >= 0)
  return ends.length === 0 ? text : text.slice(0, Math.min(...ends))
}

const units = (text: string): ReadonlyArray<string> => text.split("")

const fragments = [
  ...Sentinel.DEFAULT_SENTINELS,
  ...Sentinel.DEFAULT_SENTINELS.map((s) => s.slice(0, s.length - 1)),
  ...Sentinel.DEFAULT_SENTINELS.map((s) => s.slice(1)),
  "<|IM_END|>",
  "<|",
  "<",
  "|>",
  "</",
  "<｜",
  "▁",
  "hello ",
  "world",
  "\n",
  "é",
  "<think>",
  "</think>"
]
const text = fc.array(fc.constantFrom(...fragments), { maxLength: 30 }).map((parts) => parts.join(""))
const cuts = fc.array(fc.nat({ max: 1000 }), { maxLength: 40 })

describe("sentinel filter", () => {
  it("passes text without sentinels through unchanged", () => {
    expect(run(Sentinel.DEFAULT_SENTINELS, ["Hello, ", "world", "!"])).toBe("Hello, world!")
  })

  it("drops the sentinel and all text after it", () => {
    expect(run(Sentinel.DEFAULT_SENTINELS, ["The answer.<|im_end|>\n<|im_start|>user\nmore"])).toBe("The answer.")
    expect(run(Sentinel.DEFAULT_SENTINELS, ["a</s>", "b", "<|eot_id|>c"])).toBe("a")
  })

  it("drops everything after the earliest of several sentinels", () => {
    expect(run(Sentinel.DEFAULT_SENTINELS, ["x<|eot_id|>y<|im_end|>z"])).toBe("x")
  })

  it("is a pass-through with no sentinels", () => {
    expect(run([], ["a<|im_end|>", "b</s>"])).toBe("a<|im_end|>b</s>")
    expect(run([""], ["abc"])).toBe("abc")
  })

  it("matches case-sensitively", () => {
    expect(run(Sentinel.DEFAULT_SENTINELS, ["<|IM_END|> and </S>"])).toBe("<|IM_END|> and </S>")
  })

  it("releases a held partial on flush: it was not a sentinel", () => {
    expect(run(Sentinel.DEFAULT_SENTINELS, ["abc<|im_e"])).toBe("abc<|im_e")
    expect(run(Sentinel.DEFAULT_SENTINELS, ["abc", "<", "/"])).toBe("abc</")
  })

  it("releases a held partial as soon as it can no longer be a sentinel", () => {
    const [state, first] = Sentinel.append(Sentinel.initial(Sentinel.DEFAULT_SENTINELS), "abc<|im")
    expect(first).toBe("abc")
    const [, second] = Sentinel.append(state, "age")
    expect(second).toBe("<|image")
  })

  it("emits nothing after a sentinel, even from flush", () => {
    const [state] = Sentinel.append(Sentinel.initial(Sentinel.DEFAULT_SENTINELS), "a<|im_end|><|im")
    expect(Sentinel.append(state, "more")[1]).toBe("")
    expect(Sentinel.flush(state)).toBe("")
  })

  it("drops each default sentinel split at every position", () => {
    for (const sentinel of Sentinel.DEFAULT_SENTINELS) {
      const input = `answer${sentinel}garbage`
      for (let i = 0; i <= input.length; i++) {
        for (let j = i; j <= input.length; j++) {
          const chunks = [input.slice(0, i), input.slice(i, j), input.slice(j)]
          expect(run(Sentinel.DEFAULT_SENTINELS, chunks)).toBe("answer")
        }
      }
      expect(run(Sentinel.DEFAULT_SENTINELS, units(input))).toBe("answer")
    }
  })

  it("keeps a sentinel's prefix followed by other text, split at every position", () => {
    for (const sentinel of Sentinel.DEFAULT_SENTINELS) {
      const input = `a${sentinel.slice(0, sentinel.length - 1)}x${sentinel.slice(1)}b`
      for (let i = 0; i <= input.length; i++) {
        expect(run(Sentinel.DEFAULT_SENTINELS, [input.slice(0, i), input.slice(i)])).toBe(input)
      }
    }
  })

  it("waits for a longer sentinel that would start before a shorter one already seen", () => {
    const sentinels = ["b", "<ba"]
    for (const [input, expected] of [["a<ba", "a"], ["a<bx", "a<"], ["a<b", "a<"]] as const) {
      for (let i = 0; i <= input.length; i++) {
        expect(run(sentinels, [input.slice(0, i), input.slice(i)])).toBe(expected)
      }
    }
  })

  it("holds back less than the longest sentinel", () => {
    const longest = Math.max(...Sentinel.DEFAULT_SENTINELS.map((s) => s.length))
    let state = Sentinel.initial(Sentinel.DEFAULT_SENTINELS)
    for (const chunk of units("text <|end_of_tex")) {
      state = Sentinel.append(state, chunk)[0]
      expect(state.held.length).toBeLessThan(longest)
    }
    expect(state.held).toBe("<|end_of_tex")
  })

  it("stays linear on one large delta with many sentinel starts", () => {
    // No time budget here: a quadratic (or backtracking) implementation does not finish, and the runner's timeout
    // fails it. What these inputs cost is a figure of `npm run bench` (its filters phase).
    const input = "<".repeat(300_000) + "#"
    expect(run(["<x>", "#y", "<|im_end|>"], [input])).toBe(input)
  })

  it.prop(
    "any split gives the non-streaming result",
    [text, cuts],
    ([input, at]) => {
      expect(run(Sentinel.DEFAULT_SENTINELS, splitAt(input, at))).toBe(reference(Sentinel.DEFAULT_SENTINELS, input))
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it.prop(
    "one code unit per delta gives the non-streaming result",
    [text],
    ([input]) => {
      expect(run(Sentinel.DEFAULT_SENTINELS, units(input))).toBe(reference(Sentinel.DEFAULT_SENTINELS, input))
    },
    { fastCheck: { numRuns: 1000 } }
  )

  // Small alphabets make overlapping sentinels (one a prefix or infix of another) common.
  it.prop(
    "arbitrary overlapping sentinels agree with the reference",
    [
      fc.array(fc.string({ unit: fc.constantFrom("a", "b", "<"), maxLength: 4 }), { maxLength: 4 }),
      fc.string({ unit: fc.constantFrom("a", "b", "<", "c"), maxLength: 40 }),
      cuts
    ],
    ([sentinels, input, at]) => {
      expect(run(sentinels, splitAt(input, at))).toBe(reference(sentinels, input))
    },
    { fastCheck: { numRuns: 1000 } }
  )
  it("cuts no tool-call close, reasoning marker or mid-answer harmony marker", () => {
    const harmonyInside = Harmony.HARMONY_MARKERS.filter((m) => m !== "<|end|>" && m !== "<|return|>")
    const thinkMarkers = Think.DEFAULT_THINK_PAIRS.flatMap((p) => [p.open, p.close])
    const kept = [...Sentinel.NOT_SENTINELS.map((n) => n.token), ...harmonyInside, ...thinkMarkers]
    for (const token of kept) {
      for (const s of Sentinel.DEFAULT_SENTINELS) expect(token.includes(s), `${s} in ${token}`).toBe(false)
    }
  })
})
