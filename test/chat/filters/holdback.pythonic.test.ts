/** The pythonic and Gemma-DSL marker formats driven through the hold-back scanner, cut at every point. */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Holdback from "../../../src/chat/filters/holdback.js"
import type { ParsedToolCall, RequestTool, TextFormat } from "../../../src/chat/toolcalls/types.js"
import { canonical, type Event, outputsOf, randomCase, splitAt } from "../../support/holdbackSplits.js"

const tools: ReadonlyArray<RequestTool> = [
  {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } }
  },
  {
    name: "search",
    parameters: { type: "object", properties: { query: { type: "string" }, exact: { type: "boolean" } } }
  }
]
const FORMATS: ReadonlyArray<TextFormat> = ["llama4_pythonic", "olmo3", "lfm2", "function_gemma", "gemma4"]
const options: Holdback.ToolTextOptions = { formats: FORMATS, tools }

const stream = (chunks: ReadonlyArray<string>): ReadonlyArray<Event> => {
  const outputs = outputsOf(chunks, options)
  expect(outputs.some((o) => o._tag === "Text" && o.text === "")).toBe(false)
  return canonical(outputs)
}

const call = (name: string, args: Record<string, unknown>): ParsedToolCall => ({ name, arguments: JSON.stringify(args) })

// Prose may hold a lone close marker (it is text then); an open marker in text would be markup that leaked.
const OPEN_MARKERS = ["<|python_start|>", "<function_calls>", "<|tool_call_start|>", "<start_function_call>", "<|tool_call>"]
const noMarkerBytes = (events: ReadonlyArray<Event>): void => {
  for (const e of events) {
    if (e._tag === "Text") for (const m of OPEN_MARKERS) expect(e.text.toLowerCase().includes(m)).toBe(false)
  }
}

// ---- generated responses ----

type Piece =
  | { readonly _tag: "Text"; readonly text: string }
  | {
    readonly _tag: "Block"
    readonly markup: string
    readonly unclosed: string
    readonly opener: string
    readonly calls: ReadonlyArray<ParsedToolCall>
    readonly malformed: boolean
  }

const value = fc
  .string({
    unit: fc.constantFrom("a", "Z", " ", "\n", "'", "\"", "\\", "é", "😀", "<", "|", ">", "{", "}", "[", "]", ",", "(", ")"),
    maxLength: 10
  })
  .filter((s) => !s.includes("<|\"|>"))

/** How Python (or a template) may write a string: JSON-style, single-quoted, or triple-quoted. */
const pyString = (s: string, style: number): string => {
  if (style === 0) return JSON.stringify(s)
  const escaped = s.replaceAll("\\", "\\\\").replaceAll("'", "\\'")
  return style === 1 ? `'${escaped.replaceAll("\n", "\\n")}'` : `'''${escaped}'''`
}

const weather = fc.record({ city: value, days: fc.integer({ min: -5, max: 400 }) })
const gap = fc.constantFrom("", " ", "\n")

const block = (open: string, close: string, body: string, calls: ReadonlyArray<ParsedToolCall>) =>
  fc.tuple(randomCase(open), randomCase(close)).map(([o, c]): Piece => ({
    _tag: "Block",
    markup: `${o}${body}${c}`,
    unclosed: `${o}${body}`,
    opener: open,
    calls,
    malformed: false
  }))

const pythonicList = fc.array(fc.tuple(weather, fc.integer({ min: 0, max: 2 })), { minLength: 1, maxLength: 3 }).chain(
  (list) =>
    fc.tuple(gap, fc.constantFrom(
      ["<|python_start|>", "<|python_end|>"] as const,
      ["<|tool_call_start|>", "<|tool_call_end|>"] as const
    ))
      .chain(([g, [open, close]]) => {
        const written = list.map(([a, style]) => `get_weather(city=${pyString(a.city, style)},${g}days=${a.days})`)
        return block(open, close, `[${written.join(`,${g}`)}]`, list.map(([a]) => call("get_weather", a)))
      })
)

const olmoBlock = fc.tuple(fc.array(weather, { minLength: 1, maxLength: 3 }), fc.boolean()).chain(([list, exact]) => {
  const written = list.map((a) => `get_weather(city=${JSON.stringify(a.city)}, days=${a.days})`)
  const lines = [...written, `search(query="q", exact=${exact})`]
  const calls = [...list.map((a) => call("get_weather", a)), call("search", { query: "q", exact })]
  return block("<function_calls>", "</function_calls>", lines.join("\n"), calls)
})

const gemmaBlock = fc.tuple(weather, fc.boolean()).chain(([a, fg]) => {
  const q = fg ? "<escape>" : "<|\"|>"
  const body = `call:get_weather{city:${q}${a.city}${q},days:${a.days}}`
  return fg
    ? block("<start_function_call>", "<end_function_call>", body, [call("get_weather", a)])
    : block("<|tool_call>", "<tool_call|>", body, [call("get_weather", a)])
})

const malformedBlock = fc
  .constantFrom(
    "<|python_start|>print('hi')<|python_end|>",
    "<function_calls>get_weather(city=)</function_calls>",
    "<|tool_call_start|>[get_weather(\"Paris\")]<|tool_call_end|>",
    "<start_function_call>call:{}<end_function_call>",
    "<|tool_call>get_weather{}<tool_call|>",
    "<|tool_call><tool_call|>"
  )
  .map((markup): Piece => ({ _tag: "Block", markup, unclosed: markup, opener: "", calls: [], malformed: true }))

const prose = fc.constantFrom(
  "Hello",
  " ",
  "\n",
  "\n\n ",
  "é",
  "😀",
  "<",
  "|",
  ">",
  "|>",
  "<|",
  "<|python",
  "<|python_end|>",
  "<|tool_call_",
  "<|tool_call_end|>",
  "<tool_call|>",
  "<function_call>",
  "</function_calls>",
  "<start_function",
  "<end_function_call>",
  "<escape>",
  "[get_weather(city='x')]",
  "call:get_weather{}",
  "<|\"|>"
)
const textPiece = fc.array(prose, { minLength: 1, maxLength: 4 }).map((w): Piece => ({ _tag: "Text", text: w.join("") }))

const piece = fc.oneof(
  { arbitrary: textPiece, weight: 5 },
  { arbitrary: pythonicList, weight: 2 },
  { arbitrary: olmoBlock, weight: 2 },
  { arbitrary: gemmaBlock, weight: 2 },
  { arbitrary: malformedBlock, weight: 1 }
)

const HINTS = /<\|python_start\|>|<function_calls>|<\|tool_call_start\|>|<start_function_call>|<\|tool_call>/i
const DANGLING = /(<\|python_start\|?|<function_calls|<\|tool_call_start\|?|<start_function_call|<\|tool_call)$/i

interface Case {
  readonly text: string
  readonly expected: ReadonlyArray<Event>
}

/** The response, and its events: prose segments (whitespace-only ones touching a block dropped) and the calls. */
const reference = (pieces: ReadonlyArray<Piece>, omitClose: ReadonlyArray<boolean>): Case | undefined => {
  let text = ""
  const events: Array<Event> = []
  let segment = ""
  let sawBlock = false
  const endSegment = (last: boolean): boolean => {
    if (segment !== "" && (/\S/.test(segment) || (last && !sawBlock))) {
      if (HINTS.test(segment) || (last && DANGLING.test(segment))) return false
      events.push({ _tag: "Text", text: segment })
    }
    segment = ""
    return true
  }
  for (let i = 0; i < pieces.length; i++) {
    const p = pieces[i]!
    if (p._tag === "Text") {
      segment += p.text
      text += p.text
      continue
    }
    if (!endSegment(false)) return undefined
    sawBlock = true
    const next = pieces[i + 1]
    const mayOmit = !p.malformed && (next === undefined || (next._tag === "Block" && next.opener === p.opener))
    text += mayOmit && omitClose[i] ? p.unclosed : p.markup
    if (p.malformed) events.push({ _tag: "Malformed" })
    else events.push(...p.calls.map((c) => ({ _tag: "Call" as const, call: c })))
  }
  return endSegment(true) ? { text, expected: events } : undefined
}

const response = fc
  .tuple(fc.array(piece, { maxLength: 7 }), fc.array(fc.boolean(), { minLength: 7, maxLength: 7 }))
  .map(([pieces, omit]) => reference(pieces, omit))
  .filter((c): c is Case => c !== undefined)

describe("holdback: pythonic and Gemma marker formats", () => {
  it.prop(
    "any cuts give the template's calls, the prose exact, no marker bytes in text",
    [response, fc.array(fc.nat(), { maxLength: 24 })],
    ([c, at]) => {
      const events = stream(splitAt(c.text, at))
      expect(events).toEqual(c.expected)
      noMarkerBytes(events)
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it.prop(
    "one code unit per delta equals parseText on the whole text",
    [response],
    ([c]) => {
      const events = stream(c.text.split(""))
      const whole = Holdback.parseText(c.text, options)
      expect(events.flatMap((e) => (e._tag === "Text" ? [e.text] : [])).join("")).toBe(whole.text)
      expect(events.flatMap((e) => (e._tag === "Call" ? [e.call] : []))).toEqual(whole.calls)
      expect(events.filter((e) => e._tag === "Malformed")).toHaveLength(whole.malformed.length)
    },
    { fastCheck: { numRuns: 500 } }
  )

  describe("every split point", () => {
    const paris = call("get_weather", { city: "Paris 😀", days: 2 })
    const fixtures: ReadonlyArray<readonly [string, string, ReadonlyArray<Event>]> = [
      [
        "llama4_pythonic",
        "Sure 😀 <|python_start|>[get_weather(city='Paris 😀', days=2)]<|python_end|> done",
        [{ _tag: "Text", text: "Sure 😀 " }, { _tag: "Call", call: paris }, { _tag: "Text", text: " done" }]
      ],
      [
        "lfm2, two calls",
        "<|tool_call_start|>[get_weather(city=\"Paris 😀\", days=2), search(query='a, b', exact=True)]<|tool_call_end|>",
        [{ _tag: "Call", call: paris }, { _tag: "Call", call: call("search", { query: "a, b", exact: true }) }]
      ],
      [
        "olmo3",
        "é<function_calls>get_weather(city=\"Paris 😀\", days=2)\nsearch(exact=false)</function_calls>",
        [{ _tag: "Text", text: "é" }, { _tag: "Call", call: paris }, {
          _tag: "Call",
          call: call("search", { exact: false })
        }]
      ],
      [
        "function_gemma",
        "<start_function_call>call:get_weather{city:<escape>Paris 😀<escape>,days:2}<end_function_call>",
        [{ _tag: "Call", call: paris }]
      ],
      [
        "gemma4, block after block",
        "<|tool_call>call:get_weather{city:<|\"|>Paris 😀<|\"|>,days:2}<tool_call|><|tool_call>call:search{}<tool_call|>",
        [{ _tag: "Call", call: paris }, { _tag: "Call", call: call("search", {}) }]
      ],
      [
        "malformed lfm2 body",
        "a <|tool_call_start|>[get_weather('Paris')]<|tool_call_end|> b",
        [{ _tag: "Text", text: "a " }, { _tag: "Malformed" }, { _tag: "Text", text: " b" }]
      ]
    ]
    for (const [name, text, expected] of fixtures) {
      it(`${name}: two and three chunks, and one code unit per delta`, () => {
        for (let i = 0; i <= text.length; i++) {
          expect(stream([text.slice(0, i), text.slice(i)])).toEqual(expected)
          for (let j = i; j <= text.length; j += 5) {
            expect(stream([text.slice(0, i), text.slice(i, j), text.slice(j)])).toEqual(expected)
          }
        }
        expect(stream(text.split(""))).toEqual(expected)
      })
    }
  })

  it("a committed open hint cut off by the end is malformed; a shorter one is text", () => {
    expect(Holdback.parseText("x <|tool_call", options)).toMatchObject({ text: "x ", malformed: [expect.any(String)] })
    expect(Holdback.parseText("x <|python_start", options).malformed).toHaveLength(1)
    expect(Holdback.parseText("x <|tool_cal", options)).toEqual({ text: "x <|tool_cal", calls: [], malformed: [] })
  })
})
