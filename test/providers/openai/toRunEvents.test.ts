import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { FastCheck as fc } from "effect"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import * as Mapper from "../../../src/providers/openai/toRunEvents.js"
import { feedAll } from "./feedAll.js"
import { makeUpstreamDecoder } from "../../../src/providers/openai/upstreamSse.js"
import { chunkError, type UpstreamChunk } from "../../../src/providers/openai/upstreamWire.js"
import { chunk, completionTokens, errorEvent, sseText, textStream, usageChunk } from "../../support/fakeUpstream.js"
import { type Fixture, fixtures } from "./fixtures/index.js"
import { splitAt } from "../../support/splits.js"

const initialFor = (fixture: Fixture) =>
  Mapper.initial({
    toolMode: fixture.toolMode ?? "native",
    ...(fixture.upstreamModel !== undefined ? { upstreamModel: fixture.upstreamModel } : {})
  })

/** The provider's own pipeline minus HTTP: bytes → text → SSE → inputs → events. */
const eventsOf = (pieces: ReadonlyArray<Uint8Array>, init: Mapper.MapperState = Mapper.initial()) =>
  Stream.suspend(() => {
    const decoder = makeUpstreamDecoder()
    return Stream.fromIterable(pieces).pipe(
      Stream.decodeText(),
      Stream.mapConcat(decoder.feed),
      Stream.concat(Stream.make(Mapper.END)),
      Stream.mapAccum(init, Mapper.feed),
      Stream.flattenIterables,
      Stream.takeUntil(RunEvent.isTerminal)
    )
  }).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray), Effect.runSync)

const bytes = (text: string) => new TextEncoder().encode(text)

describe("toRunEvents: recorded upstream streams", () => {
  for (const fixture of fixtures) {
    it(fixture.name, () => {
      expect(eventsOf([bytes(fixture.sse)], initialFor(fixture))).toEqual(fixture.expected)
    })
  }

  it("the same stream byte by byte", () => {
    for (const fixture of fixtures) {
      const data = bytes(fixture.sse)
      const pieces = Array.from(data, (_, i) => data.subarray(i, i + 1))
      expect(eventsOf(pieces, initialFor(fixture))).toEqual(fixture.expected)
    }
  })
})

describe("toRunEvents: step and finish", () => {
  const run = (chunks: ReadonlyArray<object>, init = Mapper.initial()) => {
    let state = init
    const out: Array<RunEvent.RunEvent> = []
    for (const c of chunks) {
      const [next, events] = Mapper.step(state, c as UpstreamChunk)
      state = next
      out.push(...events)
    }
    return [...out, Mapper.finish(state)]
  }

  it("content → Delta, empty and null content → nothing", () => {
    expect(run([chunk({ role: "assistant", content: null }), chunk({ content: "" }), chunk({ content: "a" })])).toEqual([
      RunEvent.delta("a"),
      RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: { upstream_model: "fake-model" } })
    ])
  })

  it("reasoning_content and reasoning → one ReasoningDelta each, never both for the same text", () => {
    const events = run([
      chunk({ reasoning_content: "a" }),
      chunk({ reasoning: "b" }),
      chunk({ reasoning: "c", reasoning_content: "c" }),
      chunk({ reasoning_content: "d", content: "e" })
    ])
    expect(events.slice(0, -1)).toEqual([
      RunEvent.reasoningDelta("a"),
      RunEvent.reasoningDelta("b"),
      RunEvent.reasoningDelta("c"),
      RunEvent.reasoningDelta("d"),
      RunEvent.delta("e")
    ])
  })

  it("finish_reason defaults to stop, is kept, and becomes tool_calls when calls are present", () => {
    expect(run([chunk({ content: "x" })]).at(-1)).toMatchObject({ finishReason: "stop" })
    expect(run([chunk({ finish_reason: "length" })]).at(-1)).toMatchObject({ finishReason: "length" })
    const call = { index: 0, id: "c1", type: "function" as const, function: { name: "f", arguments: "{}" } }
    expect(run([chunk({ tool_calls: [call] }), chunk({ finish_reason: "stop" })]).at(-1)).toMatchObject({
      finishReason: "tool_calls",
      toolCalls: [{ id: "c1", name: "f", arguments: "{}" }]
    })
    // A truncated call keeps "length".
    expect(run([chunk({ tool_calls: [call], finish_reason: "length" })]).at(-1)).toMatchObject({
      finishReason: "length"
    })
  })

  it("tool call deltas: by index, name and id from the first delta, arguments concatenated, ordered by index", () => {
    const events = run([
      chunk({ tool_calls: [{ index: 1, id: "b", function: { name: "second", arguments: "{\"x\":" } }] }),
      chunk({ tool_calls: [{ index: 0, id: "a", function: { name: "first", arguments: "" } }] }),
      chunk({ tool_calls: [{ index: 1, function: { name: "second", arguments: "1}" } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: "{}" } }] })
    ])
    expect(events).toEqual([
      RunEvent.complete({
        finishReason: "tool_calls",
        toolCalls: [
          { id: "a", name: "first", arguments: "{}" },
          { id: "b", name: "second", arguments: "{\"x\":1}" }
        ],
        metadata: { upstream_model: "fake-model" }
      })
    ])
  })

  it("tool call deltas without index are keyed by id; a new id at a taken index starts a new call", () => {
    const noIndex = [
      { choices: [{ delta: { tool_calls: [{ id: "a", function: { name: "f", arguments: "{\"a\":" } }] } }] },
      { choices: [{ delta: { tool_calls: [{ function: { arguments: "1}" } }] } }] },
      { choices: [{ delta: { tool_calls: [{ id: "b", function: { name: "g", arguments: { b: 2 } } }] } }] }
    ]
    expect(run(noIndex).at(-1)).toMatchObject({
      toolCalls: [
        { id: "a", name: "f", arguments: "{\"a\":1}" },
        { id: "b", name: "g", arguments: "{\"b\":2}" }
      ]
    })
    const sameIndex = [
      chunk({ tool_calls: [{ index: 0, id: "a", function: { name: "f", arguments: "{}" } }] }),
      chunk({ tool_calls: [{ index: 0, id: "b", function: { name: "g", arguments: "{}" } }] })
    ]
    expect(run(sameIndex).at(-1)).toMatchObject({
      toolCalls: [{ id: "a", name: "f" }, { id: "b", name: "g" }]
    })
  })

  it("usage from whichever chunk carries it; the last one wins", () => {
    const events = run([
      chunk({ content: "x", usage: completionTokens(1, 1) }),
      chunk({ finish_reason: "stop" }),
      usageChunk(completionTokens(10, 5, { cached: 3, reasoning: 2 }))
    ])
    expect(events.at(-1)).toMatchObject({
      usage: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 3, reasoningTokens: 2 }
    })
  })

  it("cached prompt tokens: llama.cpp's timings.cache_n when the usage does not say; the usage's own figure first", () => {
    const timed = (usage: object) => ({ ...(usageChunk(completionTokens(6037, 4)) as object), ...usage, timings: { cache_n: 6036, prompt_n: 1 } })
    expect(run([chunk({ finish_reason: "stop" }), timed({})]).at(-1)).toMatchObject({
      usage: { inputTokens: 6037, outputTokens: 4, cachedInputTokens: 6036 }
    })
    const both = { ...(usageChunk(completionTokens(10, 1, { cached: 3 })) as object), timings: { cache_n: 9 } }
    expect(run([chunk({ finish_reason: "stop" }), both]).at(-1)).toMatchObject({ usage: { cachedInputTokens: 3 } })
    // A timings object the edge cannot read is ignored, not a broken answer.
    const odd = { ...(usageChunk(completionTokens(10, 1)) as object), timings: { cache_n: "many" } }
    const end = run([chunk({ finish_reason: "stop" }), odd]).at(-1)
    expect(end?._tag).toBe("Complete")
    expect(end?._tag === "Complete" && end.usage?.cachedInputTokens).toBeUndefined()
  })

  it("metadata: the reported model, else the configured one; tool_mode in text mode", () => {
    expect(Mapper.finish(Mapper.initial({ upstreamModel: "conf", toolMode: "text" }))).toEqual(
      RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: { upstream_model: "conf", tool_mode: "text" } })
    )
    expect(run([{ choices: [] }])).toEqual([RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })])
  })

  it("an OpenAI refusal is content", () => {
    expect(run([{ choices: [{ index: 0, delta: { content: null, refusal: "I can't help with that." } }] }])[0]).toEqual(
      RunEvent.delta("I can't help with that.")
    )
  })

  it("only the first choice is used", () => {
    const two = { choices: [{ index: 1, delta: { content: "no" } }, { index: 0, delta: { content: "yes" } }] }
    expect(run([two])[0]).toEqual(RunEvent.delta("yes"))
  })

  it("an error chunk → Failed with the upstream's message; later chunks are ignored", () => {
    expect(run([chunk({ content: "a" }), errorEvent("out of memory"), chunk({ content: "b" })])).toEqual([
      RunEvent.delta("a"),
      RunEvent.failed("upstream error: out of memory")
    ])
    expect(run([{ error: "plain text error" }]).at(-1)).toEqual(RunEvent.failed("upstream error: plain text error"))
    expect(run([{ object: "error", message: "old vllm" }]).at(-1)).toEqual(RunEvent.failed("upstream error: old vllm"))
  })
})

describe("toRunEvents: feed (the stream driver)", () => {
  const parse = (sse: string) => makeUpstreamDecoder().feed(sse)

  it("[DONE] is the terminal: Complete with what came before it (the provider feeds nothing after it)", () => {
    const events = feedAll([...parse(sseText(textStream(["a"]))), ...parse(sseText([chunk({ content: "late" })]))])
    expect(events).toEqual([
      RunEvent.delta("a"),
      RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: { upstream_model: "fake-model" } })
    ])
  })

  it("the end of the body without [DONE]: Complete after a finish_reason, else Failed", () => {
    expect(feedAll([...parse(sseText(textStream(["a"]), false)), Mapper.END]).at(-1)).toMatchObject({
      _tag: "Complete"
    })
    expect(feedAll([...parse(sseText([chunk({ content: "a" })], false)), Mapper.END])).toEqual([
      RunEvent.delta("a"),
      RunEvent.failed("upstream stream ended early")
    ])
  })

  it("a malformed event → Failed naming the problem", () => {
    expect(feedAll(parse("data: {\"choices\": [\n\n")).at(-1)).toEqual(
      RunEvent.failed("upstream sent an event that is not JSON: {\"choices\": [")
    )
    const badShape = feedAll(parse("data: {\"choices\": [{\"delta\": {\"content\": 42}}]}\n\n"))
    expect(badShape).toHaveLength(1)
    expect(badShape[0]).toMatchObject({ _tag: "Failed" })
    expect((badShape[0] as RunEvent.Failed).message).toMatch(/malformed chunk.*choices\.0\.delta\.content/)
  })

  it("`event: error` frames and keep-alive comments", () => {
    const sse = ": keep-alive\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n" +
      "event: error\ndata: {\"error\":{\"message\":\"quota exceeded\"}}\n\n"
    expect(feedAll(parse(sse))).toEqual([RunEvent.delta("a"), RunEvent.failed("upstream error: quota exceeded")])
  })

  it("an oversized event → Failed, and the decoder accepts nothing more", () => {
    const decoder = makeUpstreamDecoder({ maxEventChars: 64 })
    const first = decoder.feed(`data: ${"x".repeat(100)}`)
    expect(first).toEqual([{ _tag: "Malformed", message: "upstream sent an event longer than 64 characters" }])
    expect(decoder.feed("\n\ndata: [DONE]\n\n")).toEqual([])
  })

  const input: fc.Arbitrary<Mapper.StreamInput> = fc.oneof(
    fc.constant<Mapper.StreamInput>({ _tag: "Done" }),
    fc.constant<Mapper.StreamInput>(Mapper.END),
    fc.constant<Mapper.StreamInput>({ _tag: "Malformed", message: "m" }),
    fc.constant<Mapper.StreamInput>({ _tag: "TransportFailed", message: "t" }),
    fc.constantFrom(
      chunk({ content: "c" }),
      chunk({ reasoning: "r" }),
      chunk({ finish_reason: "stop" }),
      chunk({ tool_calls: [{ index: 0, id: "x", function: { name: "f", arguments: "{}" } }] }),
      errorEvent("e"),
      usageChunk(completionTokens(1, 2))
    ).map((c): Mapper.StreamInput => ({ _tag: "Chunk", chunk: c as UpstreamChunk }))
  )

  const endsTheStream = (input: Mapper.StreamInput): boolean =>
    input._tag !== "Chunk" || chunkError(input.chunk) !== undefined

  it("property: an input that ends the stream maps to one terminal event, last; any other input to none", () => {
    fc.assert(
      fc.property(fc.array(input, { maxLength: 20 }), (inputs) => {
        let state = Mapper.initial()
        for (const next of [...inputs, Mapper.END]) {
          const [after, events] = Mapper.feed(state, next)
          state = after
          const terminals = events.filter(RunEvent.isTerminal).length
          expect(terminals).toBe(endsTheStream(next) ? 1 : 0)
          if (terminals === 1) {
            expect(RunEvent.isTerminal(events.at(-1)!)).toBe(true)
            // Whoever feeds the mapper stops at its terminal.
            return
          }
        }
        expect.unreachable("End always ends the stream")
      }),
      { numRuns: 1000 }
    )
  })
})

describe("toRunEvents: any split of the byte stream gives the same events", () => {
  const all = fixtures.map((fixture) => ({ fixture, data: bytes(fixture.sse) }))

  it("property: recorded streams, split at arbitrary byte offsets (multi-byte characters included)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: all.length - 1 }),
        fc.array(fc.nat(), { maxLength: 40 }),
        (which, cuts) => {
          const { data, fixture } = all[which]!
          expect(eventsOf(splitAt(data, cuts), initialFor(fixture))).toEqual(fixture.expected)
        }
      ),
      { numRuns: 1500 }
    )
  })

  it("property: generated streams with \\n, \\r\\n and \\r line ends, split anywhere", () => {
    const unit = fc.constantFrom("a", "é", "😀", " ", "\n", "\"", "\\", "<", "}", "data: ")
    const token = fc.string({ unit, maxLength: 6 })
    fc.assert(
      fc.property(
        fc.array(token, { minLength: 1, maxLength: 8 }),
        fc.constantFrom("\n", "\r\n", "\r"),
        fc.array(fc.nat(), { maxLength: 30 }),
        (tokens, eol, cuts) => {
          const sse = sseText(textStream(tokens, { usage: completionTokens(3, tokens.length) })).replaceAll("\n", eol)
          const whole = eventsOf([bytes(sse)])
          expect(whole).toEqual([
            ...tokens.filter((t) => t !== "").map(RunEvent.delta),
            RunEvent.complete({
              finishReason: "stop",
              toolCalls: [],
              usage: { inputTokens: 3, outputTokens: tokens.length },
              metadata: { upstream_model: "fake-model" }
            })
          ])
          expect(eventsOf(splitAt(bytes(sse), cuts))).toEqual(whole)
        }
      ),
      { numRuns: 1000 }
    )
  })
})
