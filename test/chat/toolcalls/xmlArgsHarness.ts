/**
 * Shared by the tests of the per-argument XML formats: a tool with every schema type, generated calls rendered the
 * way each template renders them, and the streaming property (every split gives what the whole text gives, prose
 * exact, no marker in any Text).
 */
import { expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Holdback from "../../../src/chat/filters/holdback.js"
import { TEXT_FORMATS } from "../../../src/chat/toolcalls/types.js"
import type { RequestTool, TextFormat } from "../../../src/chat/toolcalls/types.js"
import { canonical, outputsOf, splitAt } from "../../support/holdbackSplits.js"

export const tools: ReadonlyArray<RequestTool> = [
  {
    name: "run",
    parameters: {
      type: "object",
      properties: {
        cmd: { type: "string" },
        n: { type: "integer" },
        ratio: { type: "number" },
        dry: { type: "boolean" },
        env: { type: "object" },
        args: { type: "array" },
        mode: { enum: ["1", "2"] },
        maybe: { type: ["integer", "null"] }
      }
    }
  },
  { name: "get_time" }
]

export const calls = (list: ReadonlyArray<readonly [string, unknown]>) => ({
  _tag: "Calls",
  calls: list.map(([name, args]) => ({ name, arguments: JSON.stringify(args) }))
})

/** Every text format but bare_json: the family must coexist with all other markup. */
const ALL: ReadonlyArray<TextFormat> = TEXT_FORMATS.filter((f) => f !== "bare_json")
export const options: Holdback.ToolTextOptions = { formats: ALL, tools }

export interface GenCall {
  readonly name: string
  readonly args: Readonly<Record<string, unknown>>
}

/** A template's way of writing a value: a string as it is, anything else as JSON. */
export const written = (value: unknown): string => (typeof value === "string" ? value : JSON.stringify(value))

// No `/`, `|` or `｜`: no close tag or marker can be spelt by a value.
const safeString = fc.string({
  unit: fc.constantFrom("a", "Z", " ", "\n", "<", ">", "{", "}", "[", "]", "\"", "'", "&", "=", "é", "😀", "\t"),
  maxLength: 12
})
const json = fc.oneof(fc.integer(), fc.boolean(), safeString, fc.constant(null))

const runArgs = fc.record(
  {
    cmd: safeString,
    n: fc.integer({ min: -1000, max: 100000 }),
    ratio: fc.constantFrom(0.5, -2.25, 1e-7, 3),
    dry: fc.boolean(),
    env: fc.dictionary(fc.constantFrom("A", "b", "é"), json, { maxKeys: 3 }),
    args: fc.array(json, { maxLength: 3 }),
    mode: fc.constantFrom("1", "2"),
    maybe: fc.oneof(fc.integer({ min: 0, max: 9 }), fc.constant(null))
  },
  { requiredKeys: [] }
)

export const genCall: fc.Arbitrary<GenCall> = fc.oneof(
  runArgs.map((args) => ({ name: "run", args })),
  fc.constant({ name: "get_time", args: {} })
)

const prose = fc.constantFrom(
  "Hello",
  "a < b > c",
  "😀é",
  "{\"a\": 1}",
  "<tool",
  "<tool_c x",
  "<minimax:tool_cal x",
  "<seed:tool",
  "<｜DSML｜function",
  "<｜DSML｜tool_x",
  "<|open|>response<|sep|>",
  "<|open|>tool",
  "<tool_calls:opensourc",
  "<arg_key>k</arg_key>",
  "<invoke name=\"run\">",
  "<parameter=cmd>",
  "line\n\nnext"
)

const stream = (chunks: ReadonlyArray<string>) => canonical(outputsOf(chunks, options))

/** The chunks' events equal the whole text's, the prose comes through exact, and no Text holds a marker. */
export const expectStreams = (
  text: string,
  chunks: ReadonlyArray<string>,
  prose: string,
  markers: ReadonlyArray<string>
): void => {
  const whole = Holdback.parseText(text, options)
  const events = stream(chunks)
  const texts = events.flatMap((e) => (e._tag === "Text" ? [e.text] : []))
  expect(texts.join("")).toBe(whole.text)
  expect(whole.text).toBe(prose)
  expect(events.flatMap((e) => (e._tag === "Call" ? [e.call] : []))).toEqual(whole.calls)
  expect(events.filter((e) => e._tag === "Malformed").length).toBe(whole.malformed.length)
  for (const t of texts) for (const m of markers) expect(t.toLowerCase()).not.toContain(m.toLowerCase())
}

export interface Family {
  /** One block holding these calls, as the template writes it. */
  readonly block: (list: ReadonlyArray<GenCall>) => string
  /** The calls one block holds at most (GLM: one). */
  readonly perBlock: number
  readonly markers: ReadonlyArray<string>
}

/** The streaming properties of a family: generated prose and blocks, cut at random and at every point. */
export const streamingProperties = (family: Family, sample: string): void => {
  const response = fc
    .tuple(prose, fc.array(fc.tuple(fc.array(genCall, { minLength: 1, maxLength: family.perBlock }), prose), {
      minLength: 1,
      maxLength: 3
    }))
    .map(([first, blocks]) => {
      const text = first + blocks.map(([list, after]) => family.block(list) + after).join("")
      const prose = first + blocks.map(([, after]) => after).join("")
      const expected = blocks.flatMap(([list]) => list.map((c) => ({ name: c.name, arguments: JSON.stringify(c.args) })))
      return { text, prose, expected }
    })

  it.prop(
    "any split: the template's calls, typed by schema, and the prose exact",
    [response, fc.array(fc.nat(), { maxLength: 24 })],
    ([c, cuts]) => {
      expect(Holdback.parseText(c.text, options).calls).toEqual(c.expected)
      expectStreams(c.text, splitAt(c.text, cuts), c.prose, family.markers)
    },
    { fastCheck: { numRuns: 500 } }
  )

  it("every split point of a sample, and one code unit per delta", () => {
    const prose = Holdback.parseText(sample, options).text
    for (let i = 0; i <= sample.length; i++) {
      expectStreams(sample, [sample.slice(0, i), sample.slice(i)], prose, family.markers)
    }
    expectStreams(sample, sample.split(""), prose, family.markers)
  })
}
