import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Harmony from "../../../src/chat/filters/harmony.js"
import * as Sentinel from "../../../src/chat/filters/sentinel.js"
import { everySplit, splitAt, units } from "../../support/splits.js"

type Out = Harmony.HarmonyOutput

/** Adjacent text of one kind joined: the pieces depend on the split, their text does not. */
const normalise = (outs: ReadonlyArray<Out>): ReadonlyArray<Out> => {
  const joined: Array<Out> = []
  for (const o of outs) {
    const last = joined[joined.length - 1]
    if ((o._tag === "Content" || o._tag === "Reasoning") && last !== undefined && last._tag === o._tag) {
      joined[joined.length - 1] = { _tag: o._tag, text: last.text + o.text }
    } else joined.push(o)
  }
  return joined
}

const runRaw = (chunks: ReadonlyArray<string>): { readonly outs: ReadonlyArray<Out>; readonly engaged: boolean } => {
  let state = Harmony.initial
  const outs: Array<Out> = []
  for (const chunk of chunks) {
    const [next, out] = Harmony.append(state, chunk)
    state = next
    outs.push(...out)
  }
  const engaged = Harmony.engaged(state)
  outs.push(...Harmony.flush(state))
  return { outs, engaged }
}

const run = (chunks: ReadonlyArray<string>): ReadonlyArray<Out> => normalise(runRaw(chunks).outs)

const content = (text: string): Out => ({ _tag: "Content", text })
const reasoning = (text: string): Out => ({ _tag: "Reasoning", text })
const call = (name: string, args: string): Out => ({ _tag: "Call", call: { name, arguments: args } })

const hasMarker = (text: string): boolean => {
  const lower = text.toLowerCase()
  return Harmony.HARMONY_MARKERS.some((m) => lower.includes(m))
}

const malformedOf = (outs: ReadonlyArray<Out>): ReadonlyArray<string> =>
  outs.flatMap((o) => (o._tag === "Malformed" ? [o.reason] : []))

describe("harmony filter", () => {
  it("routes analysis to reasoning and final to content", () => {
    const text =
      "<|channel|>analysis<|message|>User asks: \"What is 2 + 2?\" Simple arithmetic.<|end|>" +
      "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>"
    expect(run([text])).toEqual([reasoning("User asks: \"What is 2 + 2?\" Simple arithmetic."), content("2 + 2 = 4.")])
  })

  it("gives a call with the recipient in the channel part, after <|constrain|>json", () => {
    const text =
      "<|channel|>analysis<|message|>Need the weather.<|end|>" +
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"SF\"}<|call|>"
    expect(run([text])).toEqual([reasoning("Need the weather."), call("get_weather", "{\"city\":\"SF\"}")])
  })

  it("gives a call with the recipient in the role part (the template's own rendering)", () => {
    const text = "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"SF\"}<|call|>"
    expect(run([text])).toEqual([call("get_weather", "{\"city\":\"SF\"}")])
    const noSpace = "<|channel|>commentary to=functions.f<|constrain|>json<|message|>{}<|call|>"
    expect(run([noSpace])).toEqual([call("f", "{}")])
  })

  it("keeps a commentary preamble as content, then the call", () => {
    const text =
      "<|channel|>analysis<|message|>plan<|end|><|start|>assistant<|channel|>commentary<|message|>**Action plan**:\n" +
      "1. Generate a file<|end|><|start|>assistant<|channel|>commentary to=functions.generate_file<|constrain|>json" +
      "<|message|>{\"template\": \"basic_html\", \"path\": \"index.html\"}<|call|>"
    expect(run([text])).toEqual([
      reasoning("plan"),
      content("**Action plan**:\n1. Generate a file"),
      call("generate_file", "{\"template\":\"basic_html\",\"path\":\"index.html\"}")
    ])
  })

  it("reads arguments with nested JSON, quotes, newlines and unicode", () => {
    const args = { q: "say \"hi\"\n<|end|> is text here", nested: { list: [1, { a: null }], emoji: "😀 é ｜" } }
    const text = `<|channel|>commentary to=functions.search <|constrain|>json<|message|>${JSON.stringify(args)}<|call|>`
    // `<|end|>` inside a JSON string is still a marker: harmony has no escaping, the model never writes it there.
    expect(malformedOf(run([text]))).toHaveLength(1)
    const clean = { q: "say \"hi\"\nthere", nested: { list: [1, { a: null }], emoji: "😀 é ｜" } }
    const ok = `<|channel|>commentary to=functions.search <|constrain|>json<|message|>${JSON.stringify(clean, null, 2)}<|call|>`
    expect(run([ok])).toEqual([call("search", JSON.stringify(clean))])
  })

  it("reads empty arguments, and a JSON string holding the object", () => {
    expect(run(["<|channel|>commentary to=functions.now<|message|><|call|>"])).toEqual([call("now", "{}")])
    expect(run(["<|channel|>commentary to=functions.now json<|message|>\"{\\\"a\\\":1}\"<|call|>"])).toEqual([
      call("now", "{\"a\":1}")
    ])
  })

  it("gives several calls when the server does not stop at <|call|>", () => {
    const text =
      "<|channel|>commentary to=functions.a json<|message|>{\"x\":1}<|call|>" +
      "<|start|>assistant<|channel|>commentary to=functions.b json<|message|>{\"y\":2}<|call|>"
    expect(run([text])).toEqual([call("a", "{\"x\":1}"), call("b", "{\"y\":2}")])
  })

  it("ends at a message not from the assistant (an invented tool reply)", () => {
    const text =
      "<|channel|>commentary to=functions.a json<|message|>{}<|call|>" +
      "<|start|>functions.a to=assistant<|channel|>commentary<|message|>{\"sunny\": true}<|end|>" +
      "<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>"
    expect(run([text])).toEqual([call("a", "{}")])
  })

  it("drops everything after <|return|>", () => {
    expect(run(["<|channel|>final<|message|>done<|return|>junk<|start|>user<|message|>x"])).toEqual([content("done")])
  })

  it("takes a call whose stream ended without <|call|> when its JSON is whole", () => {
    expect(run(["<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": [1, 2]}"])).toEqual([
      call("f", "{\"a\":[1,2]}")
    ])
  })

  it("reports a call cut off, invalid JSON, non-object arguments and a header with no body", () => {
    const cut = run(["<|channel|>commentary to=functions.f json<|message|>{\"a\": [1, "])
    expect(malformedOf(cut)).toEqual(["harmony: arguments of functions.f: cut off before its JSON ended"])
    expect(malformedOf(run(["<|channel|>commentary to=functions.f json<|message|>{oops}<|call|>"]))[0]).toMatch(
      /^harmony: arguments of functions\.f: invalid JSON/
    )
    expect(malformedOf(run(["<|channel|>commentary to=functions.f json<|message|>[1]<|call|>"]))).toEqual([
      "harmony: arguments of functions.f are not a JSON object"
    ])
    expect(malformedOf(run(["<|channel|>commentary to=functions.f json<|call|>"]))).toEqual([
      "harmony: call to functions.f has no <|message|>"
    ])
    expect(malformedOf(run(["<|channel|>commentary to=functions.f json"]))).toEqual([
      "harmony: call to functions.f has no <|message|>"
    ])
    expect(malformedOf(run(["<|channel|>commentary to=functions. json<|message|>{}<|call|>"]))).toEqual([
      "harmony: call without a function name"
    ])
  })

  it("reports a built-in tool recipient as malformed and drops its body", () => {
    const text = "<|channel|>analysis<|message|>look it up<|end|><|start|>assistant<|channel|>analysis to=browser.search " +
      "code<|message|>{\"query\":\"x\"}<|call|>"
    expect(run([text])).toEqual([
      reasoning("look it up"),
      { _tag: "Malformed", reason: "harmony: message to browser.search, which is not a function (no built-in tools are offered)" }
    ])
    expect(malformedOf(run(["<|channel|>analysis to=python code<|message|>print(1)<|call|>"]))).toHaveLength(1)
  })

  it("matches markers in any ASCII case and drops leading whitespace", () => {
    expect(run(["\n <|CHANNEL|>Analysis<|Message|>r<|END|><|Start|>Assistant<|channel|>FINAL<|message|>a<|RETURN|>"]))
      .toEqual([reasoning("r"), content("a")])
  })

  it("passes text that does not start with a harmony marker through untouched", () => {
    expect(run(["Hello <|channel|>final<|message|>x<|end|>"])).toEqual([content("Hello <|channel|>final<|message|>x<|end|>")])
    expect(run(["  <|chan", "nel>"])).toEqual([content("  <|channel>")])
    expect(run([" \n"])).toEqual([content(" \n")])
    expect(run(["  <|sta"])).toEqual([content("  <|sta")])
  })

  it("holds nothing back once the first non-whitespace char decided", () => {
    const [state, out] = Harmony.append(Harmony.initial, "  Hi")
    expect(out).toEqual([content("  Hi")])
    expect(Harmony.append(state, "<|end|>")[1]).toEqual([content("<|end|>")])
    expect(Harmony.engaged(state)).toBe(false)
  })

  it("streams reasoning and content as they come, holding only a partial marker", () => {
    let [state, out] = Harmony.append(Harmony.initial, "<|channel|>analysis<|message|>thin")
    expect(out).toEqual([reasoning("thin")])
    ;[state, out] = Harmony.append(state, "king<|en")
    expect(out).toEqual([reasoning("king")])
    expect(Harmony.heldChars(state)).toBe(4)
    ;[state, out] = Harmony.append(state, "ds")
    expect(out).toEqual([reasoning("<|ends")])
    expect(Harmony.engaged(state)).toBe(true)
  })

  it("ends a message at <|start|> or <|channel|> when <|end|> is missing, and drops stray header markers", () => {
    expect(run(["<|channel|>analysis<|message|>r<|start|>assistant<|channel|>final<|message|>a"])).toEqual([
      reasoning("r"),
      content("a")
    ])
    expect(run(["<|channel|>analysis<|message|>r<|channel|>final<|message|>a<|constrain|>b"])).toEqual([
      reasoning("r"),
      content("ab")
    ])
  })

  it("shows text between messages as content, whitespace between them dropped", () => {
    expect(run(["<|channel|>analysis<|message|>r<|end|>\n\n<|start|>assistant<|channel|>final<|message|>a<|end|>\n"]))
      .toEqual([reasoning("r"), content("a")])
    expect(run(["<|channel|>final<|message|>a<|end|>\n stray <|start|>assistant<|channel|>final<|message|>b"])).toEqual([
      content("astray b")
    ])
  })

  it("gives up on a header longer than the cap", () => {
    const out = run(["<|channel|>" + "x".repeat(Harmony.MAX_HEADER_CHARS + 1) + "<|message|>hi"])
    expect(out).toEqual([{ _tag: "Malformed", reason: `harmony: message header longer than ${Harmony.MAX_HEADER_CHARS} chars` }])
  })

  it("routes the documented shapes identically at every split point", () => {
    const inputs = [
      "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b<|return|>",
      "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{\"k\":\"é😀\"}<|call|>",
      " <|channel|>commentary to=functions.g <|constrain|>json<|message|>{}<|call|>x"
    ]
    for (const input of inputs) {
      const expected = run([input])
      everySplit(input, (chunks) => expect(run(chunks)).toEqual(expected))
    }
  })

  it("stays linear on one large delta with many marker starts", () => {
    const body = "<|".repeat(150_000) + "x"
    expect(run(["<|channel|>final<|message|>" + body])).toEqual([content(body)])
    const text = "<|channel|>final<|message|>" + "<|end|>".repeat(50_000)
    expect(run([text])).toEqual([])
  })

  /** Harmony in front of the sentinel filter (as the session is to chain them): content and reasoning each through one. */
  interface Composed {
    readonly content: string
    readonly reasoning: string
    readonly calls: number
  }

  const composed = (chunks: ReadonlyArray<string>): Composed => {
    let harmony = Harmony.initial
    let contentSentinel = Sentinel.initial(Sentinel.DEFAULT_SENTINELS)
    let reasoningSentinel = Sentinel.initial(Sentinel.DEFAULT_SENTINELS)
    let contentText = ""
    let reasoningText = ""
    let calls = 0
    const take = (outs: ReadonlyArray<Out>) => {
      for (const o of outs) {
        if (o._tag === "Content") {
          const [next, text] = Sentinel.append(contentSentinel, o.text)
          contentSentinel = next
          contentText += text
        } else if (o._tag === "Reasoning") {
          const [next, text] = Sentinel.append(reasoningSentinel, o.text)
          reasoningSentinel = next
          reasoningText += text
        } else if (o._tag === "Call") calls++
      }
    }
    for (const chunk of chunks) {
      const [next, outs] = Harmony.append(harmony, chunk)
      harmony = next
      take(outs)
    }
    take(Harmony.flush(harmony))
    return {
      content: contentText + Sentinel.flush(contentSentinel),
      reasoning: reasoningText + Sentinel.flush(reasoningSentinel),
      calls
    }
  }

  it("in front of the sentinel filter, keeps harmony's <|end|> from cutting the answer; Phi-3's still cuts", () => {
    const gptOss = "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>answer<|return|>"
    const phi3 = "The answer.<|end|>\n<|user|>more"
    everySplit(gptOss, (chunks) => expect(composed(chunks)).toEqual({ content: "answer", reasoning: "think", calls: 0 }))
    everySplit(phi3, (chunks) => expect(composed(chunks)).toEqual({ content: "The answer.", reasoning: "", calls: 0 }))
    const call = "<|channel|>analysis<|message|>t<|end|>" +
      "<|start|>assistant<|channel|>commentary to=functions.f json<|message|>{}<|call|>"
    expect(composed([call])).toEqual({ content: "", reasoning: "t", calls: 1 })
  })

  // ---- properties -------------------------------------------------------------------------------------------------

  const bodyWords = [
    "hello",
    " world",
    "\n",
    " ",
    "é",
    "😀",
    "｜",
    "<",
    "<|",
    "<|en",
    "<|cal",
    "<|START",
    "<think>",
    "end",
    "to=functions.x",
    "{\"a\": 1}"
  ]
  const bodyText = fc.array(fc.constantFrom(...bodyWords), { maxLength: 8 }).map((parts) => parts.join(""))
  const caseOf = (marker: string, upper: boolean): string => (upper ? marker.toUpperCase() : marker)
  const argsValue = fc.dictionary(
    fc.constantFrom("a", "b", "city", "q"),
    fc.oneof(fc.integer(), fc.string({ maxLength: 6 }), fc.constant(null), fc.array(fc.boolean(), { maxLength: 2 }))
  )

  type Msg =
    | { readonly kind: "analysis" | "final" | "commentary"; readonly text: string }
    | { readonly kind: "call"; readonly name: string; readonly args: Readonly<Record<string, unknown>>; readonly inRole: boolean }

  const message: fc.Arbitrary<Msg> = fc.oneof(
    fc.record({ kind: fc.constantFrom("analysis" as const, "final" as const, "commentary" as const), text: bodyText }),
    fc.record({
      kind: fc.constant("call" as const),
      name: fc.constantFrom("get_weather", "f", "search.v2"),
      args: argsValue,
      inRole: fc.boolean()
    })
  )

  /** A response built from messages, and what the filter should make of it. */
  const shaped = fc
    .tuple(
      fc.constantFrom("", " ", "\n"),
      fc.array(message, { minLength: 1, maxLength: 4 }),
      fc.constantFrom("", "<|return|>", "<|call|>", "<|end|>"),
      fc.boolean()
    )
    .map(([lead, msgs, last, upper]) => {
      let text = lead
      const expected: Array<Out> = []
      msgs.forEach((m, i) => {
        const start = i === 0 ? "" : caseOf("<|start|>", upper) + "assistant"
        const ch = caseOf("<|channel|>", upper)
        const msg = caseOf("<|message|>", upper)
        if (m.kind === "call") {
          const json = JSON.stringify(m.args)
          text += m.inRole
            ? i === 0
              ? `${ch}commentary to=functions.${m.name} json${msg}${json}`
              : `${start} to=functions.${m.name}${ch}commentary json${msg}${json}`
            : `${start}${ch}commentary to=functions.${m.name} ${caseOf("<|constrain|>", upper)}json${msg}${json}`
          expected.push(call(m.name, json))
        } else {
          text += `${start}${ch}${m.kind}${msg}${m.text}`
          if (m.text !== "") expected.push(m.kind === "analysis" ? reasoning(m.text) : content(m.text))
        }
        const closing = i === msgs.length - 1 ? last : m.kind === "call" ? "<|call|>" : "<|end|>"
        text += caseOf(closing, upper)
      })
      return { text, expected: normalise(expected) }
    })

  const fragments = [
    ...Harmony.HARMONY_MARKERS,
    ...Harmony.HARMONY_MARKERS.map((m) => m.toUpperCase()),
    ...Harmony.HARMONY_MARKERS.map((m) => m.slice(0, m.length - 2)),
    "assistant",
    "analysis",
    "final",
    "commentary",
    " to=functions.f",
    " to=browser.search",
    "json",
    "{\"a\":1}",
    "{",
    " ",
    "\n",
    "😀",
    "<",
    "|>",
    "functions.f to=assistant"
  ]
  const soup = fc
    .tuple(
      fc.constantFrom("", "<|channel|>", "<|start|>", " <|start|>"),
      fc.array(fc.constantFrom(...fragments), { maxLength: 24 })
    )
    .map(([head, parts]) => head + parts.join(""))
  const cuts = fc.array(fc.nat({ max: 2000 }), { maxLength: 40 })

  it.prop(
    "a response built from messages gives their reasoning, content and calls, split anywhere",
    [shaped, cuts],
    ([{ text, expected }, at]) => {
      expect(run([text])).toEqual(expected)
      expect(run(splitAt(text, at))).toEqual(expected)
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it.prop(
    "a built response, one code unit per delta, gives the same",
    [shaped],
    ([{ text, expected }]) => {
      expect(run(units(text))).toEqual(expected)
    },
    { fastCheck: { numRuns: 500 } }
  )

  it.prop(
    "any text, split anywhere, gives what the whole text gives; engaged, no piece holds a marker",
    [fc.oneof(soup, shaped.map((s) => s.text)), cuts],
    ([text, at]) => {
      const whole = runRaw([text])
      const split = runRaw(splitAt(text, at))
      const single = runRaw(units(text))
      expect(normalise(split.outs)).toEqual(normalise(whole.outs))
      expect(normalise(single.outs)).toEqual(normalise(whole.outs))
      if (whole.engaged) {
        for (const { outs } of [whole, split, single]) {
          for (const o of outs) if (o._tag === "Content" || o._tag === "Reasoning") expect(hasMarker(o.text)).toBe(false)
        }
      }
    },
    { fastCheck: { numRuns: 2000 } }
  )

  it.prop(
    "text not starting with a harmony marker passes through untouched",
    [fc.string({ maxLength: 40 }).filter((t) => !/^\s*<\|(channel|start)\|>/i.test(t)), cuts],
    ([text, at]) => {
      const joined = run(splitAt(text, at))
      expect(joined).toEqual(text === "" ? [] : [content(text)])
    },
    { fastCheck: { numRuns: 1000 } }
  )
})
