import type * as Response from "@effect/ai/Response"
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Either from "effect/Either"
import {
  completionParts,
  finishReason,
  streamEnd,
  streamStart,
  streamStep,
  toolCallPart,
  usage
} from "../../src/ai/parts.js"
import type { Emission } from "../../src/chat/sessionTypes.js"
import type { ChatCompletion, ChatCompletionChunk } from "../../src/dialects/chat-completions/completion.js"
import * as Render from "../../src/dialects/chat-completions/render.js"

type Finish = Extract<Emission, { readonly _tag: "Finish" }>
type Delta = Exclude<Emission, { readonly _tag: "Finish" | "Error" }>

const right = <A>(e: Either.Either<A, string>): A =>
  Either.getOrElse(e, (reason) => expect.fail(`expected parts, got: ${reason}`))

const context = (reasoningField: Render.ResponseContext["reasoningField"]): Render.ResponseContext => ({
  id: "chatcmpl-1",
  created: 1_700_000_000,
  model: "mine",
  reasoningField,
  includeUsage: true
})

/** The same answer as the edge renders it for `create` and for `stream` (its own renderers). */
const rendered = (ctx: Render.ResponseContext, emissions: ReadonlyArray<Delta>, finish: Finish) => {
  const body = Render.completion(ctx, [...emissions, finish])
  if (body._tag !== "Body") return expect.fail("a finished answer renders a body")
  const builder = Render.chunkBuilder(ctx)
  const chunks: Array<ChatCompletionChunk> = [...builder.head]
  for (const e of [...emissions, finish]) builder.emission(e, chunks)
  return { completion: body.body, chunks }
}

const streamed = (chunks: ReadonlyArray<ChatCompletionChunk>): ReadonlyArray<Response.StreamPartEncoded> => {
  let state = streamStart
  const out: Array<Response.StreamPartEncoded> = []
  for (const chunk of chunks) {
    const [next, parts] = right(streamStep(state, chunk))
    state = next
    out.push(...parts)
  }
  return [...out, ...streamEnd(state)]
}

const call = (id: string, name: string, args: string) => ({ id, name, arguments: args })

describe("a chat.completion as generateText's parts", () => {
  it("metadata, reasoning, text, calls with parsed parameters, the finish with its usage", () => {
    const completion: ChatCompletion = {
      id: "chatcmpl-1",
      object: "chat.completion",
      created: 1_700_000_000,
      model: "mine",
      choices: [{
        index: 0,
        message: {
          role: "assistant",
          content: "Checking.",
          refusal: null,
          reasoning_content: "hm",
          tool_calls: [{ id: "c1", type: "function", function: { name: "GetWeather", arguments: "{\"city\":\"Oslo\"}" } }]
        },
        logprobs: null,
        finish_reason: "tool_calls"
      }],
      usage: {
        prompt_tokens: 5,
        completion_tokens: 7,
        total_tokens: 12,
        prompt_tokens_details: { cached_tokens: 2 },
        completion_tokens_details: { reasoning_tokens: 3 }
      }
    }
    expect(right(completionParts(completion))).toEqual([
      { type: "response-metadata", id: "chatcmpl-1", modelId: "mine", timestamp: "2023-11-14T22:13:20.000Z" },
      { type: "reasoning", text: "hm" },
      { type: "text", text: "Checking." },
      { type: "tool-call", id: "c1", name: "GetWeather", params: { city: "Oslo" } },
      {
        type: "finish",
        reason: "tool-calls",
        usage: { inputTokens: 5, outputTokens: 7, totalTokens: 12, reasoningTokens: 3, cachedInputTokens: 2 }
      }
    ])
  })

  it("arguments that are not JSON (or smuggle a prototype) are refused; no arguments are no parameters", () => {
    const wire = (args: string) => ({ id: "c1", type: "function" as const, function: { name: "f", arguments: args } })
    expect(toolCallPart(wire("{\"a\":"))).toEqual(Either.left("the arguments of the call to 'f' are not JSON: {\"a\":"))
    expect(Either.isLeft(toolCallPart(wire("{\"__proto__\":{\"x\":1}}")))).toBe(true)
    expect(toolCallPart(wire(" "))).toEqual(Either.right({ type: "tool-call", id: "c1", name: "f", params: {} }))
  })

  it("finish reasons: OpenAI's mapped; none, or an upstream's own, by whether the answer called tools", () => {
    expect(finishReason("stop", false)).toBe("stop")
    expect(finishReason("length", true)).toBe("length")
    expect(finishReason("tool_calls", true)).toBe("tool-calls")
    expect(finishReason("function_call", true)).toBe("tool-calls")
    expect(finishReason("content_filter", false)).toBe("content-filter")
    expect(finishReason(null, false)).toBe("unknown")
    expect(finishReason(undefined, true)).toBe("tool-calls")
    expect(finishReason("eos_token", false)).toBe("other")
    expect(finishReason("eos_token", true)).toBe("tool-calls")
  })

  it("no usage reported: every count undefined", () => {
    expect(usage(null)).toEqual({ inputTokens: undefined, outputTokens: undefined, totalTokens: undefined })
  })
})

const text = fc.string({ minLength: 1, maxLength: 8 })
// `@effect/ai` parses arguments with a secure JSON parse that refuses `__proto__` and `constructor` keys (a
// prototype-pollution guard, not the edge's): arguments here are the ones it accepts.
const args = fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)).filter((json) => !/"(__proto__|constructor)"\s*:/.test(json))
const delta: fc.Arbitrary<Delta> = fc.oneof(
  text.map((t) => ({ _tag: "Content" as const, text: t })),
  text.map((t) => ({ _tag: "Reasoning" as const, text: t })),
  fc.array(fc.tuple(fc.constantFrom("a", "b"), args), { minLength: 1, maxLength: 2 }).map((calls) => ({
    _tag: "ToolCalls" as const,
    calls: calls.map(([name, a], i) => call(`call_${i}`, name, a))
  }))
)
const finish: fc.Arbitrary<Finish> = fc.record({
  _tag: fc.constant("Finish" as const),
  finishReason: fc.constantFrom("stop", "length", "tool_calls", "eos"),
  usage: fc.option(fc.record({ inputTokens: fc.nat(99), outputTokens: fc.nat(99) }), { nil: undefined })
})

const joined = (parts: ReadonlyArray<Response.StreamPartEncoded>, type: "text-delta" | "reasoning-delta") =>
  parts.flatMap((p) => (p.type === type ? [p.delta] : [])).join("")

describe("chunks as streamText's parts, for any answer", () => {
  it.prop(
    "the stream says what the completion says: text, reasoning, calls, finish and usage alike",
    [fc.array(delta, { maxLength: 10 }), finish, fc.constantFrom<Render.ResponseContext["reasoningField"]>("reasoning_content", "reasoning", "both")],
    ([emissions, end, field]) => {
      const { completion, chunks } = rendered(context(field), emissions, end)
      const whole = right(completionParts(completion))
      const parts = streamed(chunks)
      const textOf = (type: "text" | "reasoning") => whole.flatMap((p) => (p.type === type ? [p.text] : [])).join("")
      expect(joined(parts, "text-delta")).toBe(textOf("text"))
      expect(joined(parts, "reasoning-delta")).toBe(textOf("reasoning"))
      expect(parts.filter((p) => p.type === "tool-call")).toEqual(whole.filter((p) => p.type === "tool-call"))
      expect(parts.filter((p) => p.type === "finish")).toEqual(whole.filter((p) => p.type === "finish"))
      expect(parts[0]).toEqual(whole[0])
      // And what the run said, through the edge's renderers and back.
      const said = (tag: "Content" | "Reasoning") => emissions.flatMap((e) => (e._tag === tag ? [e.text] : [])).join("")
      expect(textOf("text")).toBe(said("Content"))
      expect(textOf("reasoning")).toBe(said("Reasoning"))
      expect(whole.flatMap((p) => (p.type === "tool-call" ? [[p.name, p.params]] : []))).toEqual(
        emissions.flatMap((e) => (e._tag === "ToolCalls" ? e.calls.map((c) => [c.name, JSON.parse(c.arguments)]) : []))
      )
      expect(whole.at(-1)).toMatchObject({ usage: { inputTokens: end.usage?.inputTokens, outputTokens: end.usage?.outputTokens } })
    },
    { fastCheck: { numRuns: 500 } }
  )

  it.prop(
    "blocks are well formed: one open at a time, every delta in the open block of its kind, each started ended, one finish last",
    [fc.array(delta, { maxLength: 10 }), finish],
    ([emissions, end]) => {
      const parts = streamed(rendered(context("reasoning_content"), emissions, end).chunks)
      let open: { readonly kind: string; readonly id: string } | undefined
      const seen = new Set<string>()
      for (const p of parts.slice(0, -1)) {
        switch (p.type) {
          case "text-start":
          case "reasoning-start":
            expect(open).toBeUndefined()
            expect(seen.has(p.id)).toBe(false)
            seen.add(p.id)
            open = { kind: p.type.split("-")[0] ?? "", id: p.id }
            break
          case "text-delta":
          case "reasoning-delta":
            expect(open).toEqual({ kind: p.type.split("-")[0], id: p.id })
            expect(p.delta).not.toBe("")
            break
          case "text-end":
          case "reasoning-end":
            expect(open).toEqual({ kind: p.type.split("-")[0], id: p.id })
            open = undefined
            break
          case "tool-call":
            expect(open).toBeUndefined()
            break
          default:
            expect(p.type).toBe("response-metadata")
        }
      }
      expect(open).toBeUndefined()
      expect(parts.at(-1)?.type).toBe("finish")
      expect(parts.filter((p) => p.type === "response-metadata")).toHaveLength(1)
    },
    { fastCheck: { numRuns: 500 } }
  )

  it("a stream that ends without a finish chunk still ends its block and finishes (unknown, no usage)", () => {
    const { chunks } = rendered(context("reasoning_content"), [{ _tag: "Content", text: "cut" }], {
      _tag: "Finish",
      finishReason: "stop",
      usage: undefined
    })
    const parts = streamed(chunks.slice(0, 2))
    expect(parts.map((p) => p.type)).toEqual(["response-metadata", "text-start", "text-delta", "text-end", "finish"])
    expect(parts.at(-1)).toMatchObject({ reason: "unknown", usage: { inputTokens: undefined } })
  })

  it("a chunk whose call's arguments are not JSON is refused", () => {
    const { chunks } = rendered(context("reasoning_content"), [{ _tag: "ToolCalls", calls: [call("c", "f", "{")] }], {
      _tag: "Finish",
      finishReason: "tool_calls",
      usage: undefined
    })
    const [first, second] = chunks
    if (first === undefined || second === undefined) return expect.fail("a head and a call chunk")
    const [state] = right(streamStep(streamStart, first))
    expect(streamStep(state, second)).toEqual(Either.left("the arguments of the call to 'f' are not JSON: {"))
  })
})
