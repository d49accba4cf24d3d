/**
 * Every text tool-call family through a REAL llama.cpp server: a request-level GBNF (the model's `extraBody.grammar`)
 * forces the tiny random model to write exactly the family's markup for `get_weather(city, days)`, with the server's
 * own tokens and SSE chunking; the edge must give the call through Chat Completions, Responses and Messages, streamed
 * and not, with the prose as content and no marker anywhere in content or reasoning.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import * as Holdback from "../../src/chat/filters/holdback.js"
import { TEXT_FORMATS } from "../../src/protocol/ModelOptions.js"
import { type Api, APIS, ask, CALL_FINISH, type Outcome } from "./apis.js"
import { startEdge, type RealEdge } from "./edge.js"
import { ALL_MARKERS, ARGS, FAMILIES, type Family, grammarOf, uncovered } from "./families.js"

const upstream = inject("realupUpstream")
let edge: RealEdge | undefined
const url = (): string => {
  if (edge === undefined) throw new Error("no edge")
  return edge.url
}

beforeAll(async () => {
  edge = await startEdge(upstream, FAMILIES.map((f) => ({
    id: f.id,
    grammar: grammarOf(f.prose + f.markup),
    ...(f.toolFormats !== undefined ? { toolFormats: f.toolFormats } : {})
  })))
})
afterAll(async () => {
  await edge?.close()
})

const MODES = [false, true] as const
const cases = FAMILIES.flatMap((family) =>
  APIS.flatMap((api) => MODES.map((stream) => ({ family, api, stream, name: `${family.id} ${api} ${stream ? "stream" : "json"}` })))
)

const noMarkers = (family: Family, out: Outcome): ReadonlyArray<string> =>
  out.texts.flatMap((t) =>
    [...new Set([...family.markers, ...ALL_MARKERS])].filter((m) => t.toLowerCase().includes(m.toLowerCase()))
  )

describe("the families' markup", () => {
  it("covers every text format and harmony", () => {
    expect(uncovered()).toEqual([])
    expect(FAMILIES.length).toBe(TEXT_FORMATS.length)
  })

  it("parses as one call offline (the hold-back over the whole text)", () => {
    const tools = [
      { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } } },
      { name: "search", parameters: { type: "object", properties: { query: { type: "string" } } } }
    ]
    const formats = TEXT_FORMATS.filter((f) => f !== "harmony")
    // The answer structures (harmony, Functionary v3.2) are the session's, not the hold-back's.
    for (const f of FAMILIES.filter((x) => x.id !== "harmony" && x.id !== "functionary_v32")) {
      const parsed = Holdback.parseText(f.prose + f.markup, { formats, tools })
      expect({ id: f.id, text: parsed.text, calls: parsed.calls, malformed: parsed.malformed.length }).toEqual({
        id: f.id,
        text: f.prose,
        calls: [{ name: "get_weather", arguments: JSON.stringify(ARGS) }],
        malformed: 0
      })
    }
  })
})

describe.concurrent("through llama-server", () => {
  it.each(cases)("$name", async ({ family, api, stream }) => {
    const out = await ask({ url: url(), model: family.id, api, stream })
    const seen = {
      content: out.content,
      reasoning: out.reasoning,
      calls: out.calls,
      finish: out.finish,
      markers: noMarkers(family, out),
      error: out.error
    }
    const want = {
      content: family.content ?? family.prose,
      reasoning: family.reasoning ?? "",
      calls: [{ name: "get_weather", arguments: ARGS }],
      finish: CALL_FINISH[api],
      markers: [],
      error: undefined
    }
    if (JSON.stringify(seen) !== JSON.stringify(want)) {
      console.log(`${family.id} ${api} ${stream ? "stream" : "json"}: ${JSON.stringify(out.raw)}`)
    }
    expect(seen).toEqual(want)
  })
})

// A call cut off by max_tokens (the grammar is longer than the answer may be): finish `length` (Messages
// `max_tokens`), the prose before it kept, no partial markup shown, no call. A marker-less shape (a whole-answer
// JSON or pythonic call) cut off is not known to be a call: it is shown as the text it is.
const MARKERLESS: ReadonlyArray<string> = ["pythonic", "bare_json", "llamacpp_envelope"]
const cut: Array<{ readonly name: string; readonly maxTokens: number; readonly seen: unknown }> = []

const tokenCount = async (content: string): Promise<number> => {
  const response = await fetch(upstream.replace(/\/v1$/, "/tokenize"), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ content })
  })
  const json = (await response.json()) as { tokens?: ReadonlyArray<number> }
  return json.tokens?.length ?? 0
}

const cutCases = FAMILIES.flatMap((family) =>
  (["chat", "messages"] as ReadonlyArray<Api>).flatMap((api) =>
    MODES.map((stream) => ({ family, api, stream, name: `${family.id} ${api} ${stream ? "stream" : "json"}` }))
  )
)

describe.concurrent("cut off by max_tokens", () => {
  afterAll(() => {
    console.log(
      "max_tokens cut-offs:\n" +
        cut.sort((a, b) => a.name.localeCompare(b.name)).map((c) => `  ${c.name} (max ${c.maxTokens}): ${JSON.stringify(c.seen)}`).join("\n")
    )
  })

  it.each(cutCases)("$name", async ({ family, api, stream, name }) => {
    const prose = await tokenCount(family.prose)
    const whole = await tokenCount(family.prose + family.markup)
    const maxTokens = prose + Math.max(1, Math.floor((whole - prose) / 2))
    const out = await ask({ url: url(), model: family.id, api, stream, maxTokens })
    cut.push({
      name,
      maxTokens,
      seen: {
        finish: out.finish,
        content: out.content,
        reasoning: out.reasoning,
        calls: out.calls,
        markers: noMarkers(family, out),
        ...(out.error !== undefined ? { error: out.error } : {})
      }
    })
    expect(out.error).toBeUndefined()
    expect(out.finish).toBe(api === "messages" ? "max_tokens" : "length")
    expect(out.calls).toEqual([])
    if (MARKERLESS.includes(family.id)) {
      expect(family.markup.startsWith(out.content)).toBe(true)
    } else {
      expect(noMarkers(family, out)).toEqual([])
      // The grammar may spell the prose in more tokens than counted: then the cut falls in the prose itself.
      if (family.id !== "harmony") expect((family.content ?? family.prose).startsWith(out.content)).toBe(true)
    }
  })
})
