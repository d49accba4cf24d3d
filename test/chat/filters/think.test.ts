import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Sentinel from "../../../src/chat/filters/sentinel.js"
import * as Think from "../../../src/chat/filters/think.js"
import { everySplit, splitAt, units } from "../../support/splits.js"

interface Routed {
  readonly content: string
  readonly reasoning: string
}

const run = (implicitOpen: boolean, chunks: ReadonlyArray<string>): Routed => {
  let state = Think.initial({ implicitOpen })
  let content = ""
  let reasoning = ""
  for (const chunk of chunks) {
    const [next, out] = Think.append(state, chunk)
    state = next
    content += out.content
    reasoning += out.reasoning
  }
  const last = Think.flush(state)
  return { content: content + last.content, reasoning: reasoning + last.reasoning }
}

/** Sentinel first, then think, as the chat session composes them. */
const runComposed = (implicitOpen: boolean, chunks: ReadonlyArray<string>): Routed => {
  let sentinel = Sentinel.initial(Sentinel.DEFAULT_SENTINELS)
  let think = Think.initial({ implicitOpen })
  let content = ""
  let reasoning = ""
  const feed = (text: string) => {
    const [next, out] = Think.append(think, text)
    think = next
    content += out.content
    reasoning += out.reasoning
  }
  for (const chunk of chunks) {
    const [next, text] = Sentinel.append(sentinel, chunk)
    sentinel = next
    feed(text)
  }
  feed(Sentinel.flush(sentinel))
  const last = Think.flush(think)
  return { content: content + last.content, reasoning: reasoning + last.reasoning }
}

const asciiLower = (text: string): string => text.replace(/[A-Z]/g, (c) => c.toLowerCase())

/** Non-streaming reference for the leading block, over every pair (markers in any ASCII case). */
const reference = (implicitOpen: boolean, text: string, pairs = Think.DEFAULT_THINK_PAIRS): Routed => {
  const lead = /^\s*/.exec(text)?.[0].length ?? 0
  const lower = asciiLower(text)
  const pair = pairs.find((p) => lower.startsWith(asciiLower(p.open), lead))
  if (pair === undefined && !implicitOpen) return { content: text, reasoning: "" }
  const from = pair === undefined ? 0 : lead + pair.open.length
  const closes = (pair === undefined ? pairs : [pair]).map((p) => asciiLower(p.close))
  let at = -1
  let length = 0
  for (const close of closes) {
    const i = lower.indexOf(close, from)
    if (i >= 0 && (at < 0 || i < at)) [at, length] = [i, close.length]
  }
  if (at < 0) return { content: "", reasoning: text.slice(from) }
  return { content: text.slice(at + length).replace(/^\s+/, ""), reasoning: text.slice(from, at) }
}

const referenceComposed = (implicitOpen: boolean, text: string): Routed => {
  const ends = Sentinel.DEFAULT_SENTINELS.map((s) => text.indexOf(s)).filter((i) => i >= 0)
  return reference(implicitOpen, ends.length === 0 ? text : text.slice(0, Math.min(...ends)))
}

const whitespace = fc
  .array(fc.constantFrom(" ", "\n", "\n\n", "\t", "\r\n", "\u00a0", "\u3000"), { maxLength: 4 })
  .map((parts) => parts.join(""))
const openTag = fc.constantFrom("<think>", "<THINK>", "<Think>", "<tHiNk>", "")
const closeTag = fc.constantFrom("</think>", "</THINK>", "</Think>", "")
const words = [
  "hello",
  " world",
  "\n",
  " ",
  "é",
  "｜",
  "\u212a", // KELVIN SIGN folds to "k" under Unicode rules, but must not match the ASCII tag
  "<",
  "</",
  "<th",
  "</thi",
  "think>",
  ">",
  "<thinking>",
  "<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>",
  "<think>",
  "</think>"
]
const prose = fc.array(fc.constantFrom(...words), { maxLength: 12 }).map((parts) => parts.join(""))
const sentinelTail = fc.oneof(
  fc.constant(""),
  fc.tuple(fc.constantFrom(...Sentinel.DEFAULT_SENTINELS), prose).map(([s, garbage]) => s + garbage),
  fc.constantFrom(...Sentinel.DEFAULT_SENTINELS.map((s) => s.slice(0, s.length - 1)))
)
/** Content shaped like model output: optional leading block, then the answer, maybe a sentinel and garbage. */
const shaped = fc
  .tuple(whitespace, openTag, prose, closeTag, whitespace, prose, sentinelTail)
  .map((parts) => parts.join(""))
const soup = fc
  .array(fc.constantFrom(...words, "<THINK>", "</Think>", " ", "\n\n", ...Sentinel.DEFAULT_SENTINELS), {
    maxLength: 16
  })
  .map((parts) => parts.join(""))
const anyText = fc.oneof(shaped, soup)
const cuts = fc.array(fc.nat({ max: 1000 }), { maxLength: 40 })

describe("think filter", () => {
  it("routes a leading block to reasoning and drops the whitespace after it", () => {
    expect(run(false, ["<think>plan</think>\n\nanswer"])).toEqual({ content: "answer", reasoning: "plan" })
    expect(run(false, ["\n  <think>plan</think> answer"])).toEqual({ content: "answer", reasoning: "plan" })
  })

  it("keeps whitespace inside the block and inside the answer", () => {
    expect(run(false, ["<think>\nplan\n</think>\n\nline 1\n\nline 2\n"])).toEqual({
      content: "line 1\n\nline 2\n",
      reasoning: "\nplan\n"
    })
  })

  it("is a pass-through when content does not start with <think>", () => {
    expect(run(false, ["Hello ", "<think>x</think>"])).toEqual({ content: "Hello <think>x</think>", reasoning: "" })
    expect(run(false, ["  <thinking>", " more"])).toEqual({ content: "  <thinking> more", reasoning: "" })
  })

  it("leaves a later <think> in content", () => {
    expect(run(false, ["<think>a</think>b <think>c</think>"])).toEqual({
      content: "b <think>c</think>",
      reasoning: "a"
    })
  })

  it("matches tags case-insensitively", () => {
    expect(run(false, ["<THINK>a</THINK>b"])).toEqual({ content: "b", reasoning: "a" })
    expect(run(false, ["<Think>a</tHINK>b"])).toEqual({ content: "b", reasoning: "a" })
  })

  it("does not fold non-ASCII letters onto the tag", () => {
    expect(run(false, ["<thin\u212a>a"])).toEqual({ content: "<thin\u212a>a", reasoning: "" })
    expect(run(false, ["<think>a</thin\u212a>b"])).toEqual({ content: "", reasoning: "a</thin\u212a>b" })
  })

  it("treats a block that never closes as reasoning to the end", () => {
    expect(run(false, ["<think>still ", "thinking </thi"])).toEqual({ content: "", reasoning: "still thinking </thi" })
  })

  it("treats tool-call markup inside the block as reasoning", () => {
    const call = "<tool_call>{\"name\":\"f\"}</tool_call>"
    expect(run(false, [`<think>${call}</think>done`])).toEqual({ content: "done", reasoning: call })
  })

  it("keeps whitespace-only content as content", () => {
    expect(run(false, [" ", "\n\n", "\t"])).toEqual({ content: " \n\n\t", reasoning: "" })
    expect(run(false, ["  <thi"])).toEqual({ content: "  <thi", reasoning: "" })
  })

  it("gives nothing when the answer after the block is only whitespace", () => {
    expect(run(false, ["<think>a</think>", "\n", " \n"])).toEqual({ content: "", reasoning: "a" })
  })

  it("holds the undecided start, then releases it as content", () => {
    const [state, out] = Think.append(Think.initial({ implicitOpen: false }), "\n<thi")
    expect(out).toEqual({ content: "", reasoning: "" })
    expect(Think.append(state, "s")[1]).toEqual({ content: "\n<this", reasoning: "" })
  })

  it("holds back only a possible partial </think> inside the block", () => {
    const [state, out] = Think.append(Think.initial({ implicitOpen: false }), "<think>abc</th")
    expect(out).toEqual({ content: "", reasoning: "abc" })
    expect(Think.append(state, "ose")[1]).toEqual({ content: "", reasoning: "</those" })
  })

  describe("implicitOpen", () => {
    it("starts as reasoning until </think>", () => {
      expect(run(true, ["plan", "</think>\nanswer"])).toEqual({ content: "answer", reasoning: "plan" })
    })

    it("swallows an explicit leading <think>", () => {
      expect(run(true, ["\n<think>plan</think>answer"])).toEqual({ content: "answer", reasoning: "plan" })
    })

    it("keeps leading whitespace that is not before a tag as reasoning", () => {
      expect(run(true, ["\nplan</think>answer"])).toEqual({ content: "answer", reasoning: "\nplan" })
    })

    it("finds </think> right at the start", () => {
      expect(run(true, ["<", "/think>answer"])).toEqual({ content: "answer", reasoning: "" })
    })

    it("is reasoning to the end when </think> never comes", () => {
      expect(run(true, ["all ", "reasoning <thi"])).toEqual({ content: "", reasoning: "all reasoning <thi" })
      expect(run(true, ["  <thi"])).toEqual({ content: "", reasoning: "  <thi" })
    })
  })

  it("routes <think> and </think> split at every position", () => {
    for (const implicitOpen of [false, true]) {
      for (const input of ["<think>ab</think>cd", " <THINK>a</Think> \nb", "<think><think></think></think>"]) {
        const expected = reference(implicitOpen, input)
        everySplit(input, (chunks) => expect(run(implicitOpen, chunks)).toEqual(expected))
      }
    }
    const expected = { content: "cd", reasoning: "ab" }
    everySplit("<think>ab</think>cd", (chunks) => expect(run(false, chunks)).toEqual(expected))
  })

  it("drops each default sentinel split at every position, composed with think", () => {
    for (const sentinel of Sentinel.DEFAULT_SENTINELS) {
      const input = `<think>r</think>\nans${sentinel}junk`
      everySplit(input, (chunks) => expect(runComposed(false, chunks)).toEqual({ content: "ans", reasoning: "r" }))
    }
  })

  it("agrees with JavaScript's \\s on every UTF-16 code unit", () => {
    for (let unit = 0; unit <= 0xffff; unit++) {
      expect(Think.isWhitespace(unit)).toBe(/\s/.test(String.fromCharCode(unit)))
    }
  })

  for (const implicitOpen of [false, true]) {
    describe(`properties (implicitOpen: ${implicitOpen})`, () => {
      it.prop(
        "any split gives the non-streaming result",
        [anyText, cuts],
        ([input, at]) => {
          expect(run(implicitOpen, splitAt(input, at))).toEqual(reference(implicitOpen, input))
        },
        { fastCheck: { numRuns: 1000 } }
      )

      it.prop(
        "one code unit per delta gives the non-streaming result",
        [anyText],
        ([input]) => {
          expect(run(implicitOpen, units(input))).toEqual(reference(implicitOpen, input))
        },
        { fastCheck: { numRuns: 1000 } }
      )

      it.prop(
        "sentinel then think, split anywhere, gives the non-streaming result",
        [anyText, cuts],
        ([input, at]) => {
          const out = runComposed(implicitOpen, splitAt(input, at))
          expect(out).toEqual(referenceComposed(implicitOpen, input))
          for (const s of Sentinel.DEFAULT_SENTINELS) {
            expect(out.content).not.toContain(s)
            expect(out.reasoning).not.toContain(s)
          }
        },
        { fastCheck: { numRuns: 1000 } }
      )
    })
  }
  describe("every family's pair", () => {
    const pairs = Think.DEFAULT_THINK_PAIRS
    const markers = pairs.flatMap((p) => [p.open, p.close])
    const pairWords = [
      ...words,
      ...markers,
      ...markers.map((m) => m.slice(0, m.length - 1)),
      ...markers.map((m) => m.slice(1)),
      "[",
      "[/",
      "<|",
      "|>",
      "<channel",
      "thought",
      "\ud83d\ude00"
    ]
    const pairProse = fc.array(fc.constantFrom(...pairWords), { maxLength: 12 }).map((parts) => parts.join(""))
    const casing = (text: string, how: number): string =>
      how === 0 ? text : how === 1 ? text.toUpperCase() : asciiLower(text)
    const pairShaped = fc
      .tuple(
        fc.tuple(whitespace, fc.nat({ max: pairs.length - 1 }), fc.nat({ max: 2 }), fc.boolean()),
        fc.tuple(pairProse, fc.boolean(), whitespace, pairProse, sentinelTail)
      )
      .map(([[ws, i, how, withOpen], [inner, withClose, ws2, answer, tail]]) => {
        const pair = pairs[i] ?? { open: "<think>", close: "</think>" }
        const open = withOpen ? casing(pair.open, how) : ""
        return [ws, open, inner, withClose ? casing(pair.close, how) : "", ws2, answer, tail].join("")
      })
    const pairSoup = fc.array(fc.constantFrom(...pairWords, " ", "\n\n"), { maxLength: 16 }).map((parts) => parts.join(""))
    const pairText = fc.oneof(pairShaped, pairSoup)

    it("routes each family's leading block, markers in any case", () => {
      for (const { open, close } of pairs) {
        expect(run(false, [`\n${open}plan${close}\n\nanswer`])).toEqual({ content: "answer", reasoning: "plan" })
        expect(run(false, [`${open.toLowerCase()}p${close.toUpperCase()}a`])).toEqual({ content: "a", reasoning: "p" })
        expect(run(true, [`plan${close} answer`])).toEqual({ content: "answer", reasoning: "plan" })
        expect(run(false, [`x ${open}p${close}`])).toEqual({ content: `x ${open}p${close}`, reasoning: "" })
      }
    })

    it("reads the templates' own renderings", () => {
      // Gemma 4 writes `<|channel>thought\n…\n<channel|>`; Seed-OSS `<seed:think>…</seed:think>`;
      // Mistral `[THINK]…[/THINK]`; Cohere's prompt opens `<|START_THINKING|>`.
      expect(run(false, ["<|channel>thought\nstep 1\n<channel|>The answer"])).toEqual({
        content: "The answer",
        reasoning: "\nstep 1\n"
      })
      expect(run(false, ["<seed:think>r</seed:think>\na"])).toEqual({ content: "a", reasoning: "r" })
      expect(run(false, ["[THINK]r[/THINK]a"])).toEqual({ content: "a", reasoning: "r" })
      expect(run(true, ["I will look.<|END_THINKING|><|START_RESPONSE|>hi"])).toEqual({
        content: "<|START_RESPONSE|>hi",
        reasoning: "I will look."
      })
    })

    it("closes only with the pair that opened, and with any pair when implicit", () => {
      expect(run(false, ["[THINK]a</think>b[/THINK]c"])).toEqual({ content: "c", reasoning: "a</think>b" })
      expect(run(true, ["a[/THINK]b</think>c"])).toEqual({ content: "b</think>c", reasoning: "a" })
    })

    it("uses only the pairs it is given", () => {
      const only = [{ open: "[THINK]", close: "[/THINK]" }]
      const [, out] = Think.append(Think.initial({ implicitOpen: false, pairs: only }), "<think>a</think>b")
      expect(out).toEqual({ content: "<think>a</think>b", reasoning: "" })
      const [, mistral] = Think.append(Think.initial({ implicitOpen: false, pairs: only }), "[think]a[/think]b")
      expect(mistral).toEqual({ content: "b", reasoning: "a" })
    })

    it("splits every pair at every position", () => {
      for (const { open, close } of pairs) {
        for (const implicitOpen of [false, true]) {
          const input = ` ${open}ab${close}\ncd`
          const expected = reference(implicitOpen, input)
          expect(expected).toEqual({ content: "cd", reasoning: "ab" })
          everySplit(input, (chunks) => expect(run(implicitOpen, chunks)).toEqual(expected))
        }
      }
    })

    it("stays linear on one large delta with many close starts", () => {
      const input = "<think>" + "<|".repeat(100_000) + "[".repeat(100_000)
      expect(run(false, [input])).toEqual({ content: "", reasoning: input.slice("<think>".length) })
      expect(run(true, ["<".repeat(200_000)])).toEqual({ content: "", reasoning: "<".repeat(200_000) })
    })

    for (const implicitOpen of [false, true]) {
      it.prop(
        `any split gives the non-streaming result (implicitOpen: ${implicitOpen})`,
        [pairText, cuts],
        ([input, at]) => {
          const expected = reference(implicitOpen, input)
          expect(run(implicitOpen, splitAt(input, at))).toEqual(expected)
          expect(run(implicitOpen, units(input))).toEqual(expected)
        },
        { fastCheck: { numRuns: 1500 } }
      )

      it.prop(
        `sentinel then think, split anywhere (implicitOpen: ${implicitOpen})`,
        [pairText, cuts],
        ([input, at]) => {
          expect(runComposed(implicitOpen, splitAt(input, at))).toEqual(referenceComposed(implicitOpen, input))
        },
        { fastCheck: { numRuns: 1000 } }
      )
    }
  })
})
