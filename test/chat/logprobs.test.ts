import { coalesce } from "../../src/chat/coalesce.js"
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Session from "../../src/chat/session.js"
import { runSession } from "../support/runSession.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"
import { answerTool, sessionConfig, weatherTool } from "../support/fixtures.js"

/**
 * Logprob entries through the session: released with the Content that shows the first char of their text,
 * dropped when none of it is shown, whatever the filters did and however the stream was cut (logprobs.ts).
 */

const done = () => RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })

/** The i-th entry: logprob -i tells them apart. */
const entry = (token: string, i: number, chars?: number): RunEvent.TokenLogprob =>
  chars === undefined ? { token, logprob: -i } : { token, logprob: -i, chars }

const released = (out: ReadonlyArray<Session.Emission>): ReadonlyArray<number> =>
  out.flatMap((e) => (e._tag === "Content" ? (e.logprobs ?? []).map((l) => -l.logprob) : []))

const releasedTokens = (out: ReadonlyArray<Session.Emission>): ReadonlyArray<string> =>
  out.flatMap((e) => (e._tag === "Content" ? (e.logprobs ?? []).map((l) => l.token) : []))

const contentOf = (out: ReadonlyArray<Session.Emission>) =>
  out.flatMap((e) => (e._tag === "Content" ? [e.text] : [])).join("")

/** One token per delta, each with its entry. */
const tokens = (...texts: ReadonlyArray<string>): ReadonlyArray<RunEvent.RunEvent> =>
  texts.map((t, i) => RunEvent.deltaWithLogprobs(t, [entry(t, i)]))

// ---------------------------------------------------------------------------
// A raw text whose chars are labelled shown or not, cut into tokens and (independently) into deltas.

const BLOCK = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>"

interface Labelled {
  readonly text: string
  readonly shown: ReadonlyArray<boolean>
}

const part = (text: string, shown: boolean): Labelled => ({ text, shown: [...text].map(() => shown) })
const concat = (parts: ReadonlyArray<Labelled>): Labelled => ({
  text: parts.map((p) => p.text).join(""),
  shown: parts.flatMap((p) => p.shown)
})

// Words start and end with a letter: no filter drops whitespace next to them.
const word = fc.stringMatching(/^[a-z]([a-z ,.]{0,6}[a-z])?$/)

/**
 * A leading think block, words between tool-call blocks, maybe an end token and what a model prints after it.
 * `lead`: content that starts like a bare JSON call (held whole, then scanned again as text).
 */
const labelled = (withBlocks: boolean): fc.Arbitrary<Labelled> =>
  fc.record({
    think: fc.option(fc.stringMatching(/^[a-z ]{0,12}$/), { nil: undefined }),
    lead: fc.boolean(),
    parts: fc.array(
      withBlocks ? fc.oneof(word.map((w) => part(w, true)), fc.constant(part(BLOCK, false))) : word.map((w) => part(w, true)),
      { minLength: 1, maxLength: 6 }
    ),
    end: fc.option(fc.stringMatching(/^[a-z <>|/]{0,8}$/), { nil: undefined })
  }).map(({ end, lead, parts, think }) =>
    concat([
      ...(think === undefined ? [] : [part(`<think>${think}</think>`, false)]),
      ...(lead ? [part("{\"a\": [1]}", true)] : []),
      ...parts,
      ...(end === undefined ? [] : [part(`<|im_end|>${end}`, false)])
    ])
  ).filter((l) => l.shown.some((s) => s))

interface Token {
  readonly start: number
  readonly end: number
}

const cutAt = (length: number, cuts: ReadonlyArray<number>): ReadonlyArray<Token> => {
  const at = [...new Set(cuts.map((c) => c % length).filter((c) => c > 0))].sort((a, b) => a - b)
  const bounds = [0, ...at, length]
  return bounds.slice(1).map((end, i) => ({ start: bounds[i] ?? 0, end }))
}

/** The deltas of `text` cut at `cuts`, each carrying the entries of the tokens that start in it. */
const deltasOf = (text: string, toks: ReadonlyArray<Token>, cuts: ReadonlyArray<number>) =>
  cutAt(text.length, cuts).map((d) => {
    const entries = toks.flatMap((t, i) => (t.start >= d.start && t.start < d.end ? [entry(text.slice(t.start, t.end), i)] : []))
    return RunEvent.deltaWithLogprobs(text.slice(d.start, d.end), entries.length > 0 ? entries : undefined)
  })

/** Where each raw char lands in the content (its index among shown chars). */
const contentOffsets = (shown: ReadonlyArray<boolean>): ReadonlyArray<number> => {
  let n = 0
  return shown.map((s) => (s ? n++ : n))
}

const firstShown = (l: Labelled, t: Token): number | undefined => {
  for (let k = t.start; k < t.end; k++) if (l.shown[k] === true) return k
  return undefined
}

const cuts = fc.array(fc.nat(), { maxLength: 12 })

describe("logprobs through the session", () => {
  it.prop(
    "no filter at work: every entry is released once, in order, and their tokens spell the content",
    [fc.array(word, { minLength: 1, maxLength: 8 }), cuts, cuts],
    ([words, tokenCuts, deltaCuts]) => {
      const text = words.join(" ")
      const toks = cutAt(text.length, tokenCuts)
      const out = runSession(sessionConfig(), [...deltasOf(text, toks, deltaCuts), done()])
      expect(released(out)).toEqual(toks.map((_, i) => i))
      expect(releasedTokens(out).join("")).toBe(contentOf(out))
      expect(contentOf(out)).toBe(text)
    },
    { fastCheck: { numRuns: 500 } }
  )

  it.prop(
    "an entry goes out with the Content that shows its text's first shown char, else never, for any cut of the stream",
    [labelled(true), fc.boolean(), cuts, cuts, fc.nat({ max: 20 })],
    ([l, withTools, tokenCuts, deltaCuts, batchAt]) => {
      const config = sessionConfig({ tools: withTools ? [weatherTool] : [] })
      // Without tools, markup is text: shown.
      const subject = withTools ? l : { text: l.text, shown: [...l.text].map((_, k) => l.shown[k] === true || inBlock(l, k)) }
      const toks = cutAt(subject.text.length, tokenCuts)
      const deltas = deltasOf(subject.text, toks, deltaCuts)
      const expected = toks.flatMap((t, i) => (firstShown(subject, t) === undefined ? [] : [i]))
      const offsets = contentOffsets(subject.shown)

      const out = runSession(config, [...deltas, done()])
      expect(contentOf(out)).toBe([...subject.text].filter((_, k) => subject.shown[k]).join(""))
      expect(released(out)).toEqual(expected)
      // Each entry rides with the Content emission holding its first shown char.
      let at = 0
      for (const e of out) {
        if (e._tag !== "Content") continue
        for (const l of e.logprobs ?? []) {
          const t = toks[-l.logprob]
          const first = t === undefined ? undefined : firstShown(subject, t)
          expect(first).toBeDefined()
          const offset = offsets[first ?? 0] ?? -1
          expect(offset).toBeGreaterThanOrEqual(at)
          expect(offset).toBeLessThan(at + e.text.length)
        }
        at += e.text.length
      }
      // The same stream in two batches, each coalesced, as two reads deliver it.
      const batches = [deltas.slice(0, batchAt), deltas.slice(batchAt)].flatMap((b) => coalesce(b))
      expect(released(runSession(config, [...batches, done()]))).toEqual(expected)
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it.prop(
    "nothing is released twice, nor after the terminal: a run that fails keeps what its filters still held",
    [labelled(true), cuts, cuts, fc.nat()],
    ([l, tokenCuts, deltaCuts, failAt]) => {
      const toks = cutAt(l.text.length, tokenCuts)
      const deltas = deltasOf(l.text, toks, deltaCuts)
      const k = failAt % (deltas.length + 1)
      const out = runSession(sessionConfig({ tools: [weatherTool] }), [
        ...deltas.slice(0, k),
        RunEvent.failed("boom"),
        ...deltas.slice(k),
        done()
      ])
      const ids = released(out)
      expect(new Set(ids).size).toBe(ids.length)
      expect(out[out.length - 1]?._tag).toBe("Error")
      // Only what the deltas before the failure showed.
      const before = runSession(sessionConfig({ tools: [weatherTool] }), [...deltas.slice(0, k), done()])
      expect(released(before).slice(0, ids.length)).toEqual(ids)
    },
    { fastCheck: { numRuns: 500 } }
  )

  it("a think block's tokens are dropped, the answer's released", () => {
    const out = runSession(sessionConfig(), [...tokens("<think>", "hmm", "</think>", "\n\n", "Hel", "lo"), done()])
    expect(contentOf(out)).toBe("Hello")
    expect(releasedTokens(out)).toEqual(["Hel", "lo"])
  })

  it("entries of settled text that showed nothing are not kept: a long think block, text after an end token", () => {
    const pendingAfter = (events: ReadonlyArray<RunEvent.RunEvent>) => {
      let s = Session.initial(sessionConfig())
      for (const e of events) s = Session.step(s, e)[0]
      return s._tag === "Open" ? s.logprobs?.pending.length : undefined
    }
    const thinking = Array.from({ length: 500 }, () => "hm ")
    expect(pendingAfter(tokens("<think>", ...thinking))).toBe(0)
    expect(pendingAfter(tokens("<think>", ...thinking, "</th"))).toBe(1)
    expect(pendingAfter(tokens("Hi", "<|im_end|>", ...thinking))).toBe(1)
  })

  it("an end token's entries are dropped, also split across deltas; a token partly shown is released", () => {
    const split = runSession(sessionConfig(), [...tokens("Hi", "<|im_", "end|>", "junk"), done()])
    expect(contentOf(split)).toBe("Hi")
    expect(releasedTokens(split)).toEqual(["Hi"])
    const partly = runSession(sessionConfig(), [...tokens("Hi<|im", "_end|>"), done()])
    expect(releasedTokens(partly)).toEqual(["Hi<|im"])
  })

  it("a held end-token prefix that was not one is released with the text that settled it", () => {
    const [s1, out1] = Session.step(Session.initial(sessionConfig()), RunEvent.deltaWithLogprobs("a<|", [entry("a<|", 0)]))
    expect(out1).toEqual([{ _tag: "Content", text: "a", logprobs: [entry("a<|", 0)] }])
    const [s2, out2] = Session.step(s1, RunEvent.deltaWithLogprobs("x", [entry("x", 1)]))
    expect(out2).toEqual([{ _tag: "Content", text: "<|x", logprobs: [entry("x", 1)] }])
    expect(Session.step(s2, done())[1]).toEqual([{ _tag: "Finish", finishReason: "stop", usage: undefined }])
  })

  it("tool-call markup's tokens are dropped, the text around it keeps its own", () => {
    const out = runSession(sessionConfig({ tools: [weatherTool] }), [
      ...tokens("Checking", " ", "<tool_call>", "{\"name\": \"get_weather\", \"arguments\": {}}", "</tool_call>", " ok"),
      done()
    ])
    expect(contentOf(out)).toBe("Checking  ok")
    expect(releasedTokens(out)).toEqual(["Checking", " ", " ok"])
  })

  it("entries whose tokens do not spell the text: `chars` places them, a zero-length one goes with the char before", () => {
    // "é" sent as two byte tokens: the first covers the char, the second none of it; then an end token.
    const out = runSession(sessionConfig(), [
      RunEvent.deltaWithLogprobs("caf", [entry("caf", 0)]),
      RunEvent.deltaWithLogprobs("é", [entry("bytes:\\xc3", 1, 1), entry("bytes:\\xa9", 2, 0)]),
      RunEvent.deltaWithLogprobs("<|im_end|>", [entry("<|im_end|>", 3)]),
      done()
    ])
    expect(contentOf(out)).toBe("café")
    expect(released(out)).toEqual([0, 1, 2])
    const dropped = runSession(sessionConfig(), [
      RunEvent.deltaWithLogprobs("<|im_end|>", [entry("<|im_end|>", 0), entry("", 1, 0)]),
      done()
    ])
    expect(released(dropped)).toEqual([])
  })

  it("completion tool: entries wait with the held text, and go with it or not at all when it is wrapped", () => {
    const config = sessionConfig({ tools: [answerTool, weatherTool], policy: { completionTool: "attempt_completion" } })
    const wrapped = runSession(config, [...tokens("All", " done"), done()])
    expect(wrapped.find((e) => e._tag === "ToolCalls")).toBeDefined()
    expect(released(wrapped)).toEqual([])
    const shown = runSession(config, [
      ...tokens("Note", "<tool_call>", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}", "</tool_call>"),
      done()
    ])
    expect(shown.filter((e) => e._tag === "Content")).toEqual([{ _tag: "Content", text: "Note", logprobs: [entry("Note", 0)] }])
  })

  it("coalesce joins the entries of adjacent deltas, and a batch without any stays as it was", () => {
    const [a, b] = tokens("a", "b")
    expect(coalesce([a!, RunEvent.delta("x"), b!])).toEqual([
      RunEvent.deltaWithLogprobs("axb", [entry("a", 0), entry("b", 1)])
    ])
    expect(coalesce([RunEvent.delta("x"), RunEvent.delta("y")])).toEqual([RunEvent.delta("xy")])
  })

  it("a run without logprobs carries none: no state, no field on its emissions", () => {
    const [s, out] = Session.step(Session.initial(sessionConfig()), RunEvent.delta("hello"))
    expect(s._tag === "Open" ? s.logprobs : "closed").toBeUndefined()
    expect(out).toEqual([{ _tag: "Content", text: "hello" }])
  })
})

const inBlock = (l: Labelled, k: number): boolean => {
  let at = l.text.indexOf(BLOCK)
  while (at >= 0) {
    if (k >= at && k < at + BLOCK.length) return true
    at = l.text.indexOf(BLOCK, at + 1)
  }
  return false
}
