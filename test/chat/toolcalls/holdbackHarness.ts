/**
 * Shared by the format families' tests: drive a format through the hold-back (`Holdback.append` / `flush`) with the
 * response cut anywhere, and generate responses of prose, near misses and blocks with the events they must give.
 */
import { expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Holdback from "../../../src/chat/filters/holdback.js"
import type { ParsedToolCall, RequestTool, TextFormat } from "../../../src/chat/toolcalls/types.js"
import { canonical, type Event, outputsOf, splitAt } from "../../support/holdbackSplits.js"
import { randomCase } from "../../support/splits.js"

export { randomCase }

export { splitAt }

export const tools: ReadonlyArray<RequestTool> = [
  {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } }
  },
  {
    name: "search",
    parameters: { type: "object", properties: { query: { type: "string" }, limit: { type: "number" } } }
  }
]

export type { Event } from "../../support/holdbackSplits.js"

export const call = (name: string, args: unknown): ParsedToolCall => ({ name, arguments: JSON.stringify(args) })
export const text = (t: string): Event => ({ _tag: "Text", text: t })
export const called = (name: string, args: unknown): Event => ({ _tag: "Call", call: call(name, args) })
export const MALFORMED: Event = { _tag: "Malformed" }
/** What a parser gives for these calls. */
export const calls = (list: ReadonlyArray<readonly [string, unknown]>) => ({
  _tag: "Calls",
  calls: list.map(([name, args]) => call(name, args))
})

/** The open hints and close tags of each markup format: none may reach a Text output whole while it is on. */
const MARKERS_OF: Partial<Record<TextFormat, ReadonlyArray<string>>> = {
  xml: ["<tool_call>"],
  qwen3_xml: ["<tool_call>"],
  mustache: ["{{tool_call}}"],
  mistral: ["[TOOL_CALLS]"],
  llama3_json: ["<|python_tag|>", "<|eom_id|>"],
  granite: ["<|tool_call|>"],
  cohere: ["<|START_ACTION|>", "<|END_ACTION|>"],
  apertus: ["<|tools_prefix|>", "<|tools_suffix|>"],
  nemotron: ["<TOOLCALL>", "</TOOLCALL>"],
  functionary_v31: ["<function=", "</function>"],
  deepseek_v3: ["<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"],
  kimi_k2: ["<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"],
  minimax_m1: ["<tool_calls>", "</tool_calls>"]
}
const ALL_MARKERS = Object.values(MARKERS_OF).flat()

const containsAny = (t: string, markers: ReadonlyArray<string>): boolean => {
  const lower = t.toLowerCase()
  return markers.some((m) => lower.includes(m.toLowerCase()))
}
const containsMarker = (t: string): boolean => containsAny(t, ALL_MARKERS)

export const options = (formats: ReadonlyArray<TextFormat>): Holdback.ToolTextOptions => ({ formats, tools })

/** The events of a response streamed in these chunks; no Text output is empty or holds a marker. */
export const stream = (chunks: ReadonlyArray<string>, opts: Holdback.ToolTextOptions): ReadonlyArray<Event> => {
  const outputs = outputsOf(chunks, opts)
  const markers = opts.formats.flatMap((f) => MARKERS_OF[f] ?? [])
  for (const o of outputs) {
    if (o._tag !== "Text") continue
    expect(o.text).not.toBe("")
    expect(containsAny(o.text, markers)).toBe(false)
  }
  return canonical(outputs)
}

/** What the whole text gives at once (`parseText`), as events in order of kind. */
const wholeSummary = (t: string, opts: Holdback.ToolTextOptions) => {
  const whole = Holdback.parseText(t, opts)
  return { text: whole.text, calls: whole.calls, malformed: whole.malformed.length }
}

const summary = (events: ReadonlyArray<Event>) => ({
  text: events.flatMap((e) => (e._tag === "Text" ? [e.text] : [])).join(""),
  calls: events.flatMap((e) => (e._tag === "Call" ? [e.call] : [])),
  malformed: events.filter((e) => e._tag === "Malformed").length
})

/** The response cut in two at every position, in three at many pairs, and one code unit per delta. */
export const expectEverySplit = (t: string, opts: Holdback.ToolTextOptions, expected: ReadonlyArray<Event>) => {
  expect(summary(expected)).toEqual(wholeSummary(t, opts))
  for (let i = 0; i <= t.length; i++) expect(stream([t.slice(0, i), t.slice(i)], opts)).toEqual(expected)
  for (let i = 0; i <= t.length; i += 2) {
    for (let j = i; j <= t.length; j += 5) {
      expect(stream([t.slice(0, i), t.slice(i, j), t.slice(j)], opts)).toEqual(expected)
    }
  }
  expect(stream(t.split(""), opts)).toEqual(expected)
}

// ---- generated responses ----

export type Piece =
  | { readonly _tag: "Text"; readonly text: string }
  | {
    readonly _tag: "Block"
    readonly markup: string
    /** The block without its close tag, when it may end at the next open tag or at the end of the response. */
    readonly unclosed: string | undefined
    readonly events: ReadonlyArray<Event>
  }

export const block = (markup: string, events: ReadonlyArray<Event>, unclosed?: string): Piece => ({
  _tag: "Block",
  markup,
  unclosed,
  events
})

/** Arguments with quotes, brackets, backslashes, newlines and multi-unit code points. */
export const argString = fc.string({
  unit: fc.constantFrom("a", "Z", " ", "\n", "<", "|", "{", "}", "[", "]", "\"", "\\", ";", "é", "😀", ">", "｜"),
  maxLength: 10
})
export const anyCall = fc.oneof(
  fc.record({ city: argString, days: fc.integer({ min: -5, max: 400 }) }).map((args) => ({
    name: "get_weather",
    args: args as Record<string, unknown>
  })),
  fc.record({ query: argString, limit: fc.constantFrom(1, 2.5, -0.25) }).map((args) => ({
    name: "search",
    args: args as Record<string, unknown>
  })),
  fc.constant({ name: "search", args: {} as Record<string, unknown> })
)
export const gap = fc.constantFrom("", " ", "\n", "\n  ")

const BASE_PROSE = ["Hello", " ", "\n", "\n\n  ", "é", "😀", "a < b", "x > y", "{", "}", "[1]", "<", "|", "<|", "|>"]

/** Prose pieces: the shared ones and the family's near misses (which must not contain a whole marker). */
export const prose = (nearMisses: ReadonlyArray<string>) =>
  fc
    .array(fc.constantFrom(...BASE_PROSE, ...nearMisses), { minLength: 1, maxLength: 4 })
    .map((words): Piece => ({ _tag: "Text", text: words.join("") }))

export interface Case {
  readonly text: string
  readonly expected: ReadonlyArray<Event>
}

/**
 * The response of these pieces and its events: text without markup, whitespace-only segments touching a block
 * dropped. Undefined when a text segment reads as markup (it would test nothing), e.g. near misses that join into
 * an open hint, or a dangling committed prefix at the end (`dangling`).
 */
const reference = (pieces: ReadonlyArray<Piece>, omitClose: ReadonlyArray<boolean>, dangling: RegExp): Case | undefined => {
  let t = ""
  const events: Array<Event> = []
  let segment = ""
  let sawBlock = false
  const endSegment = (last: boolean): boolean => {
    if (containsMarker(segment) || (last && dangling.test(segment))) return false
    if (segment !== "" && (/\S/.test(segment) || (last && !sawBlock))) events.push(text(segment))
    segment = ""
    return true
  }
  for (let i = 0; i < pieces.length; i++) {
    const p = pieces[i]!
    if (p._tag === "Text") {
      segment += p.text
      t += p.text
      continue
    }
    if (!endSegment(false)) return undefined
    sawBlock = true
    const next = pieces[i + 1]
    const mayOmit = p.unclosed !== undefined && (next === undefined || next._tag === "Block")
    t += mayOmit && omitClose[i] ? p.unclosed : p.markup
    events.push(...p.events)
  }
  return endSegment(true) ? { text: t, expected: events } : undefined
}

/**
 * Responses of prose and the family's blocks. A block given without close tag (`unclosed`) is only left open
 * before another block of the family or at the end. `dangling`: a committed open-hint prefix at the end.
 */
export const responses = (
  blocks: fc.Arbitrary<Piece>,
  nearMisses: ReadonlyArray<string>,
  dangling: RegExp
): fc.Arbitrary<Case> =>
  fc
    .tuple(
      fc.array(fc.oneof({ arbitrary: prose(nearMisses), weight: 3 }, { arbitrary: blocks, weight: 2 }), {
        maxLength: 6
      }),
      fc.array(fc.boolean(), { minLength: 6, maxLength: 6 })
    )
    .map(([pieces, omit]) => reference(pieces, omit, dangling))
    .filter((c): c is Case => c !== undefined)

export const cuts = fc.array(fc.nat(), { maxLength: 24 })

/** The generated response cut anywhere gives its events, and the same as `parseText` on the whole. */
export const expectCase = (c: Case, at: ReadonlyArray<number>, opts: Holdback.ToolTextOptions) => {
  const events = stream(splitAt(c.text, at), opts)
  expect(events).toEqual(c.expected)
  expect(summary(events)).toEqual(wholeSummary(c.text, opts))
  expect(stream(c.text.split(""), opts)).toEqual(c.expected)
}

/** Markers in random ASCII case (tag matching ignores ASCII case). */

/** Every markup format on at once (the marker-less bare shapes aside). */
export const ALL_MARKUP: ReadonlyArray<TextFormat> = [
  "xml",
  "mustache",
  "qwen3_xml",
  "mistral",
  "llama3_json",
  "granite",
  "cohere",
  "apertus",
  "nemotron",
  "functionary_v31",
  "deepseek_v3",
  "kimi_k2",
  "minimax_m1"
]

/** The property tests of one family: its format alone and with every markup format on. */
export const familyProperties = (
  format: TextFormat,
  blocks: fc.Arbitrary<Piece>,
  nearMisses: ReadonlyArray<string>,
  dangling: RegExp
) => {
  const cases = responses(blocks, nearMisses, dangling)
  it.prop(
    `${format}: any split gives the blocks' calls and the prose exactly, as parseText does`,
    [cases, cuts],
    ([c, at]) => expectCase(c, at, options([format])),
    { fastCheck: { numRuns: 400 } }
  )
  it.prop(
    `${format}: the same with every markup format on`,
    [cases, cuts],
    ([c, at]) => expectCase(c, at, options(ALL_MARKUP)),
    { fastCheck: { numRuns: 200 } }
  )
}
