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
    parameters: {
      type: "object",
      properties: {
        query: { type: "string" },
        limit: { type: "number" },
        exact: { type: "boolean" },
        tags: { type: "array" }
      }
    }
  }
]
const MARKUP: ReadonlyArray<TextFormat> = ["xml", "mustache", "qwen3_xml", "mistral"]
const options: Holdback.ToolTextOptions = { formats: MARKUP, tools }
const withBare: Holdback.ToolTextOptions = { formats: [...MARKUP, "bare_json"], tools }

const stream = (chunks: ReadonlyArray<string>, opts: Holdback.ToolTextOptions = options) => {
  const outputs = outputsOf(chunks, opts)
  expect(outputs.some((o) => o._tag === "Text" && o.text === "")).toBe(false)
  return canonical(outputs)
}

const units = (text: string): ReadonlyArray<string> => text.split("")

const call = (name: string, args: Record<string, unknown>): ParsedToolCall => ({
  name,
  arguments: JSON.stringify(args)
})

// ---- generated responses: prose, near-misses and blocks of every format ----

type Piece =
  | { readonly _tag: "Text"; readonly text: string }
  | {
    readonly _tag: "Block"
    readonly markup: string
    /** The same block without its close tag, when it may end at the next open tag or at the end of the stream. */
    readonly unclosed: string | undefined
    readonly opener: string
    readonly calls: ReadonlyArray<ParsedToolCall>
    readonly malformed: boolean
  }

const safeString = fc
  .string({
    unit: fc.constantFrom("a", "Z", " ", "\n", "<", "/", "{", "}", "[", "]", "\"", "\\", "é", "😀", ">"),
    maxLength: 12
  })
  .filter((s) => !/tool_call/i.test(s))
const gap = fc.constantFrom("", " ", "\n", "\n  ", "\t")

const weatherArgs = fc.record({ city: safeString, days: fc.integer({ min: -5, max: 400 }) })
const searchArgs = fc.record({ query: safeString, limit: fc.constantFrom(1, 2.5, -0.25, 100), exact: fc.boolean() })
const anyCall = fc.oneof(
  weatherArgs.map((a) => ({ name: "get_weather", args: a as Record<string, unknown> })),
  searchArgs.map((a) => ({ name: "search", args: a as Record<string, unknown> }))
)

const jsonBody = anyCall.chain(({ args, name }) =>
  fc.tuple(fc.boolean(), fc.boolean()).map(([asString, alias]) => ({
    body: JSON.stringify({ name, [alias ? "parameters" : "arguments"]: asString ? JSON.stringify(args) : args }),
    call: call(name, args)
  }))
)

const tagBlock = (open: string, close: string, opener: string) =>
  fc.tuple(randomCase(open), randomCase(close), gap, jsonBody, gap).map(([o, c, g1, { body, call }, g2]): Piece => ({
    _tag: "Block",
    markup: `${o}${g1}${body}${g2}${c}`,
    unclosed: `${o}${g1}${body}${g2}`,
    opener,
    calls: [call],
    malformed: false
  }))

const qwenValue = fc.string({ unit: fc.constantFrom("a", "B", " ", "\n", "é", "{", "\"", "1"), maxLength: 10 })
const qwenBlock = fc.tuple(randomCase("<tool_call>"), qwenValue, fc.integer({ min: 0, max: 99 }), fc.boolean()).map(
  ([open, city, days, withDays]): Piece => {
    const params = `<parameter=city>\n${city}\n</parameter>\n` +
      (withDays ? `<parameter=days>\n${days}\n</parameter>\n` : "")
    const unclosed = `${open}\n<function=get_weather>\n${params}</function>\n`
    return {
      _tag: "Block",
      markup: `${unclosed}</tool_call>`,
      unclosed,
      opener: "<tool_call>",
      calls: [call("get_weather", withDays ? { city, days } : { city })],
      malformed: false
    }
  }
)

const mistralBlock = fc.oneof(
  fc.tuple(randomCase("[TOOL_CALLS]"), gap, fc.array(anyCall, { minLength: 1, maxLength: 3 })).map(
    ([open, g, list]): Piece => ({
      _tag: "Block",
      markup: `${open}${g}${JSON.stringify(list.map((c) => ({ name: c.name, arguments: c.args })))}`,
      unclosed: undefined,
      opener: "[TOOL_CALLS]",
      calls: list.map((c) => call(c.name, c.args)),
      malformed: false
    })
  ),
  anyCall.map(({ args, name }): Piece => ({
    _tag: "Block",
    markup: `[TOOL_CALLS]${name}[ARGS]${JSON.stringify(args)}`,
    unclosed: undefined,
    opener: "[TOOL_CALLS]",
    calls: [call(name, args)],
    malformed: false
  }))
)

const malformedBlock = fc
  .constantFrom(
    "<tool_call>{\"name\": \"get_weather\", \"arguments\": {</tool_call>",
    "<tool_call>{\"arguments\": {}}</tool_call>",
    "<Tool_Call>\n\n</TOOL_CALL>",
    "<tool_call>[1]</tool_call>",
    "<tool_call>{\"name\": \"x\", \"arguments\": [1]}</tool_call>",
    "{{tool_call}}\"just a string\"{{/tool_call}}",
    "{{tool_call}}{\"name\": \"search\", \"arguments\": \"not json\"}{{/tool_call}}",
    "[TOOL_CALLS][{\"name\": }]",
    "[TOOL_CALLS]{\"arguments\": {}}",
    "<tool_call><function=></function></tool_call>"
  )
  .map((markup): Piece => ({ _tag: "Block", markup, unclosed: undefined, opener: "", calls: [], malformed: true }))

const prose = fc.constantFrom(
  "Hello",
  "world",
  " ",
  "\n",
  "\n\n  ",
  "\t",
  "é",
  "😀",
  "a < b",
  "x > y",
  "f(x) = {",
  "}",
  "[1, 2]",
  "<",
  "{",
  "[",
  "{{",
  "]",
  "<tool ",
  "<tools>",
  "<tool_calls>",
  "<TOOL_CALLS>",
  "<tool_call/>",
  "<Tool_Call x>",
  "<tool_c",
  "</tool_call>",
  "{{x}}",
  "{{tool}}",
  "{{tool_calls}}",
  "{{/tool_call}}",
  "[TOOL]",
  "[TOOL_CALL]",
  "[tool_callsx",
  "{ \"a\": 1 }",
  "tool_call"
)

const textPiece = fc
  .array(prose, { minLength: 1, maxLength: 4 })
  .map((words): Piece => ({ _tag: "Text", text: words.join("") }))

const piece = fc.oneof(
  { arbitrary: textPiece, weight: 5 },
  { arbitrary: tagBlock("<tool_call>", "</tool_call>", "<tool_call>"), weight: 2 },
  { arbitrary: tagBlock("{{tool_call}}", "{{/tool_call}}", "{{tool_call}}"), weight: 2 },
  { arbitrary: qwenBlock, weight: 2 },
  { arbitrary: mistralBlock, weight: 2 },
  { arbitrary: malformedBlock, weight: 1 }
)

const HINTS = /<tool_call>|\{\{tool_call\}\}|\[tool_calls\]/i
// A committed open tag cut off by the end (`{{tool_call}` too: a prefix of `{{tool_call}}` past its committed part).
const DANGLING = /(<tool_call|\{\{tool_call\}?|\[tool_calls)$/i

/** The response as text, and what the filter must make of it. */
interface Case {
  readonly text: string
  readonly expected: ReadonlyArray<Event>
}

/** Text without markup, whitespace-only segments touching a block dropped; the blocks' calls in place. */
const reference = (pieces: ReadonlyArray<Piece>, omitClose: ReadonlyArray<boolean>): Case | undefined => {
  let text = ""
  const events: Array<Event> = []
  let segment = ""
  let sawBlock = false
  const endSegment = (last: boolean) => {
    if (segment !== "" && (/\S/.test(segment) || (last && !sawBlock))) {
      // A segment that itself reads as markup would not be text: such a case tests nothing.
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
    const sameOpenerNext = next === undefined || (next._tag === "Block" && next.opener === p.opener)
    const mayOmit = p.unclosed !== undefined && sameOpenerNext
    text += mayOmit && omitClose[i] ? p.unclosed : p.markup
    if (p.malformed) events.push({ _tag: "Malformed" })
    else events.push(...p.calls.map((c) => ({ _tag: "Call" as const, call: c })))
  }
  return endSegment(true) ? { text, expected: events } : undefined
}

const response = fc
  .tuple(fc.array(piece, { maxLength: 8 }), fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }))
  .map(([pieces, omit]) => reference(pieces, omit))
  .filter((c): c is Case => c !== undefined)

const cuts = fc.array(fc.nat(), { maxLength: 24 })

describe("holdback", () => {
  describe("properties", () => {
    it.prop(
      "any split: text without markup in order exactly once, and the blocks' calls",
      [response, cuts],
      ([c, at]) => {
        expect(stream(splitAt(c.text, at))).toEqual(c.expected)
      },
      { fastCheck: { numRuns: 1000 } }
    )

    it.prop(
      "one code unit per delta gives the same",
      [response],
      ([c]) => {
        expect(stream(units(c.text))).toEqual(c.expected)
      },
      { fastCheck: { numRuns: 1000 } }
    )

    it.prop(
      "streaming (any split) equals parseText, bare_json on or off",
      [response, cuts, fc.boolean()],
      ([c, at, bare]) => {
        const opts = bare ? withBare : options
        const whole = Holdback.parseText(c.text, opts)
        const events = stream(splitAt(c.text, at), opts)
        const text = events.flatMap((e) => (e._tag === "Text" ? [e.text] : [])).join("")
        expect(text).toBe(whole.text)
        expect(events.flatMap((e) => (e._tag === "Call" ? [e.call] : []))).toEqual(whole.calls)
        expect(events.filter((e) => e._tag === "Malformed").length).toBe(whole.malformed.length)
      },
      { fastCheck: { numRuns: 1000 } }
    )

    it.prop(
      "ends: each Text output is the slice of the input ending where its end says (logprobs place text by it)",
      [
        fc.oneof(
          response.map((c) => c.text),
          // bare_json candidates, which are held whole and may be scanned again as text.
          fc.tuple(
            gap,
            fc.oneof(jsonBody.map((j) => j.body), fc.constantFrom("{ \"a\": 1 }", "{\"name\": 3}", "{\"x\"")),
            fc.constantFrom("", " ", " x", "\n", "} y", " <tool_call>{}</tool_call> z")
          ).map(([g, body, tail]) => g + body + tail)
        ),
        cuts,
        fc.boolean()
      ],
      ([text, at, bare]) => {
        const check = (out: ReadonlyArray<Holdback.ToolTextOutput>, ends: ReadonlyArray<number>, base: number) => {
          const texts = out.flatMap((o) => (o._tag === "Text" ? [o.text] : []))
          expect(ends).toHaveLength(texts.length)
          texts.forEach((t, i) => {
            const end = base + (ends[i] ?? Number.NaN)
            expect(text.slice(end - t.length, end)).toBe(t)
          })
        }
        let state = Holdback.initial(bare ? withBare : options)
        let consumed = 0
        for (const chunk of splitAt(text, at)) {
          const ends: Array<number> = []
          const [next, out] = Holdback.append(state, chunk, ends)
          consumed += chunk.length
          check(out, ends, consumed - chunk.length)
          state = next
        }
        const ends: Array<number> = []
        check(Holdback.flush(state, ends), ends, consumed)
      },
      { fastCheck: { numRuns: 1000 } }
    )

    it.prop(
      "text that cannot be markup streams through at once",
      [fc.array(fc.string({ unit: fc.constantFrom("a", "b", " ", "é", ">", "}", "]", "\n", "x") }), { maxLength: 10 })
      ],
      ([chunks]) => {
        let state = Holdback.initial(options)
        let input = ""
        let emitted = ""
        for (const chunk of chunks) {
          const [next, out] = Holdback.append(state, chunk)
          state = next
          input += chunk
          emitted += out.map((o) => (o._tag === "Text" ? o.text : "?")).join("")
          // Only leading whitespace waits (for whether a block follows it).
          expect(emitted).toBe(/\S/.test(input) ? input : "")
        }
        expect(stream(chunks)).toEqual(chunks.join("") === "" ? [] : [{ _tag: "Text", text: chunks.join("") }])
      },
      { fastCheck: { numRuns: 1000 } }
    )
  })

  describe("every byte position", () => {
    const weather = call("get_weather", { city: "Paris" })
    const body = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
    const fixtures: ReadonlyArray<readonly [string, string, ReadonlyArray<Event>]> = [
      [
        "xml",
        `Before <tool_call>\n${body}\n</tool_call> after`,
        [{ _tag: "Text", text: "Before " }, { _tag: "Call", call: weather }, { _tag: "Text", text: " after" }]
      ],
      [
        "mustache",
        `Before {{tool_call}}${body}{{/tool_call}} after`,
        [{ _tag: "Text", text: "Before " }, { _tag: "Call", call: weather }, { _tag: "Text", text: " after" }]
      ],
      [
        "two blocks, whitespace between dropped",
        `<TOOL_CALL>${body}</Tool_Call>\n\n{{tool_call}}${body}{{/tool_call}}\n`,
        [{ _tag: "Call", call: weather }, { _tag: "Call", call: weather }]
      ],
      [
        "mistral",
        `x [TOOL_CALLS] [${body}, ${body}]y`,
        [{ _tag: "Text", text: "x " }, { _tag: "Call", call: weather }, { _tag: "Call", call: weather }, {
          _tag: "Text",
          text: "y"
        }]
      ],
      [
        "qwen3",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
        [{ _tag: "Call", call: weather }]
      ]
    ]
    for (const [name, text, expected] of fixtures) {
      it(`${name}: split in two at every position`, () => {
        for (let i = 0; i <= text.length; i++) expect(stream([text.slice(0, i), text.slice(i)])).toEqual(expected)
      })
      it(`${name}: split in three at every pair of positions`, () => {
        for (let i = 0; i <= text.length; i += 1) {
          for (let j = i; j <= text.length; j += 3) {
            expect(stream([text.slice(0, i), text.slice(i, j), text.slice(j)])).toEqual(expected)
          }
        }
      })
      it(`${name}: one code unit per delta`, () => {
        expect(stream(units(text))).toEqual(expected)
      })
    }
  })

  describe("near misses", () => {
    const text = (t: string) => [{ _tag: "Text", text: t }]
    it("<tool then s> is released as <tools>", () => {
      let state = Holdback.initial(options)
      const [s1, out1] = Holdback.append(state, "see <tool")
      expect(out1).toEqual(text("see "))
      const [s2, out2] = Holdback.append(s1, "s> here")
      expect(out2).toEqual(text("<tools> here"))
      state = s2
      expect(Holdback.flush(state)).toEqual([])
    })

    it("a lone {{ then x}} is released", () => {
      const [s1, out1] = Holdback.append(Holdback.initial(options), "a {{")
      expect(out1).toEqual(text("a "))
      const [s2, out2] = Holdback.append(s1, "x}} b")
      expect(out2).toEqual(text("{{x}} b"))
      expect(Holdback.flush(s2)).toEqual([])
    })

    it("<tool_call at the very end is a malformed open tag, not content", () => {
      const [s1, out1] = Holdback.append(Holdback.initial(options), "Let me check. <tool_call")
      expect(out1).toEqual(text("Let me check. "))
      const end = Holdback.flush(s1)
      expect(end).toHaveLength(1)
      expect(end[0]?._tag).toBe("Malformed")
      expect(Holdback.parseText("  <TOOL_CALL", options)).toMatchObject({ text: "", calls: [] })
      expect(Holdback.parseText("{{tool_call", options).malformed).toHaveLength(1)
    })

    it("<tool_c at the very end is text", () => {
      expect(stream(units("abc <tool_c"))).toEqual(text("abc <tool_c"))
      expect(stream(["<tool_c"])).toEqual(text("<tool_c"))
    })

    it("an open tag that goes on differently is text", () => {
      const misses = [
        "<tool_call/>",
        "<tool_callx>",
        "<Tool_Call x=1>",
        "{{tool_call}x",
        "[TOOL_CALLS)",
        "<tool_call >"
      ]
      for (const t of misses) {
        expect(stream(units(t))).toEqual(text(t))
      }
    })

    it("upper-case tags are markup", () => {
      expect(stream(units("<TOOL_CALL>{\"name\":\"search\"}</TOOL_CALL>"))).toEqual([
        { _tag: "Call", call: { name: "search", arguments: "{}" } }
      ])
    })

    it("close tags and mustache close without an open are text", () => {
      expect(stream(["a </tool_call> {{/tool_call}} b"])).toEqual(text("a </tool_call> {{/tool_call}} b"))
    })

    it("without markup formats or without tools, text passes through", () => {
      const plain = "<tool_call>{\"name\":\"search\"}</tool_call>"
      expect(stream([plain], { formats: [], tools })).toEqual(text(plain))
      expect(stream(["  ", plain], { formats: MARKUP, tools: [] })).toEqual(text(`  ${plain}`))
    })

    it("formats that are off are text", () => {
      const t = "{{tool_call}}{\"name\":\"search\"}{{/tool_call}} [TOOL_CALLS][]"
      expect(stream(units(t), { formats: ["xml"], tools })).toEqual(text(t))
    })
  })

  describe("blocks", () => {
    it("a last block without its close tag but with complete JSON is a call", () => {
      for (const t of ["<tool_call>{\"name\":\"search\",\"arguments\":{}}\n", "{{tool_call}}{\"name\":\"search\"}"]) {
        expect(stream(units(t))).toEqual([{ _tag: "Call", call: { name: "search", arguments: "{}" } }])
      }
    })

    it("a last block cut inside its close tag is still a call", () => {
      expect(stream(["<tool_call>{\"name\":\"search\"}</tool_ca"])).toEqual([
        { _tag: "Call", call: { name: "search", arguments: "{}" } }
      ])
    })

    it("a last block without close tag and with incomplete JSON is malformed", () => {
      expect(Holdback.parseText("ok <tool_call>{\"name\":\"search\",\"argu", options)).toEqual({
        text: "ok ",
        calls: [],
        malformed: [expect.stringContaining("invalid JSON")]
      })
    })

    it("a block that opens before the previous one closed ends the previous one", () => {
      const t = "<tool_call>{\"name\":\"search\"}\n<tool_call>{\"name\":\"get_weather\"}</tool_call>"
      expect(Holdback.parseText(t, options).calls.map((c) => c.name)).toEqual(["search", "get_weather"])
    })

    it("broken JSON is malformed and none of it reaches the text", () => {
      const t = "A <tool_call>{\"name\": \"search\", \"arguments\": {\"q\": </tool_call> B"
      for (let i = 0; i <= t.length; i++) {
        const events = stream([t.slice(0, i), t.slice(i)])
        expect(events).toEqual([{ _tag: "Text", text: "A " }, { _tag: "Malformed" }, { _tag: "Text", text: " B" }])
      }
    })

    it("markup without a name or not an object is malformed", () => {
      const blocks = [
        "<tool_call>{\"arguments\":{}}</tool_call>",
        "<tool_call>42</tool_call>",
        "<tool_call></tool_call>"
      ]
      for (const t of blocks) {
        expect(Holdback.parseText(t, options)).toMatchObject({ text: "", calls: [], malformed: [expect.any(String)] })
      }
    })

    it("arguments as a JSON string are decoded to an object", () => {
      const t = "<tool_call>{\"name\":\"search\",\"arguments\":\"{\\\"query\\\":\\\"x\\\"}\"}</tool_call>"
      expect(Holdback.parseText(t, options).calls).toEqual([{ name: "search", arguments: "{\"query\":\"x\"}" }])
    })

    it("a mistral block that never closes runs to the end and is malformed", () => {
      expect(Holdback.parseText("Sure [TOOL_CALLS] I cannot do that.", options)).toMatchObject({
        text: "Sure ",
        calls: [],
        malformed: [expect.any(String)]
      })
    })
  })

  describe("whitespace", () => {
    it("leading whitespace waits for text, and is dropped when a block follows", () => {
      const [s1, out1] = Holdback.append(Holdback.initial(options), "\n\n ")
      expect(out1).toEqual([])
      const [, out2] = Holdback.append(s1, "Hi")
      expect(out2).toEqual([{ _tag: "Text", text: "\n\n Hi" }])
      expect(stream(["\n\n ", "<tool_call>{\"name\":\"search\"}</tool_call>", " \n"])).toEqual([
        { _tag: "Call", call: { name: "search", arguments: "{}" } }
      ])
    })

    it("a whitespace-only response without blocks is released at the end", () => {
      expect(stream([" ", "\n"])).toEqual([{ _tag: "Text", text: " \n" }])
    })

    it("text around blocks keeps its own whitespace", () => {
      expect(Holdback.parseText("Hi \n<tool_call>{\"name\":\"search\"}</tool_call>\n bye\n", options).text).toBe(
        "Hi \n\n bye\n"
      )
    })
  })

  describe("bare_json", () => {
    const bare = "\n {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
    it("a whole response that is one call object of a request tool is a call, at any split", () => {
      for (let i = 0; i <= bare.length; i++) {
        expect(stream([bare.slice(0, i), bare.slice(i)], withBare)).toEqual([
          { _tag: "Call", call: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }
        ])
      }
    })

    it("is held until the end, then decided", () => {
      const [s1, out1] = Holdback.append(Holdback.initial(withBare), bare)
      expect(out1).toEqual([])
      expect(Holdback.flush(s1)).toHaveLength(1)
    })

    it("an object of an unknown name, or without arguments, is text", () => {
      for (const t of ["{\"name\": \"nope\", \"arguments\": {}}", "{\"name\": \"search\"}", "{\"a\": 1}"]) {
        expect(stream(units(t), withBare)).toEqual([{ _tag: "Text", text: t }])
      }
    })

    it("text after the object releases it at once", () => {
      const [s1, out1] = Holdback.append(Holdback.initial(withBare), "{\"name\": \"search\", \"arguments\": {}}  ")
      expect(out1).toEqual([])
      const [, out2] = Holdback.append(s1, "and")
      expect(out2).toEqual([{ _tag: "Text", text: "{\"name\": \"search\", \"arguments\": {}}  and" }])
    })

    it("prose that starts with { is released as soon as it cannot be an object", () => {
      const [, out] = Holdback.append(Holdback.initial(withBare), "{x} is a set")
      expect(out).toEqual([{ _tag: "Text", text: "{x} is a set" }])
    })

    it("markup at the start is still markup", () => {
      expect(stream(units(" {{tool_call}}{\"name\":\"search\"}{{/tool_call}}"), withBare)).toEqual([
        { _tag: "Call", call: { name: "search", arguments: "{}" } }
      ])
    })

    it("without tools it is off", () => {
      expect(stream([bare], { formats: ["bare_json"], tools: [] })).toEqual([{ _tag: "Text", text: bare }])
    })
  })

  describe("linear", () => {
    it("a 2 MB block in 4-byte deltas, and 2 MB of near misses, come through whole", () => {
      // No time budget here: a quadratic (or backtracking) implementation does not finish, and the runner's timeout
      // fails it. What these inputs cost is a figure of `npm run bench` (its filters phase).

      const big = `<tool_call>{"name":"search","arguments":{"query":"${"x".repeat(2_000_000)}"}}</tool_call>`
      const nearMisses = "<tool {{x}} [TOOL] <tool_c ".repeat(80_000)
      for (const t of [big, nearMisses]) {
        const chunks: Array<string> = []
        for (let i = 0; i < t.length; i += 4) chunks.push(t.slice(i, i + 4))
        const out = stream(chunks)
        const text = out.flatMap((o) => (o._tag === "Text" ? [o.text] : [])).join("")
        const calls = out.flatMap((o) => (o._tag === "Call" ? [o.call] : []))
        if (t === big) expect(calls.map((c) => c.arguments.length)).toEqual([`{"query":"${"x".repeat(2_000_000)}"}`.length])
        else expect(text).toBe(t)
      }
    })
  })
})
