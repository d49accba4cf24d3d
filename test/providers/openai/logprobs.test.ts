import { describe, expect, it } from "@effect/vitest"
import { feedAll } from "./feedAll.js"
import { decodeEvent } from "../../../src/providers/openai/upstreamWire.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"

/** Upstream `choices[0].logprobs.content` → the Delta's entries: decoded by field guards, laid over the chunk's text. */

const lp = (token: string, logprob: number, top: ReadonlyArray<readonly [string, number]> = []) => ({
  token,
  logprob,
  bytes: [...new TextEncoder().encode(token)],
  top_logprobs: top.map(([t, l]) => ({ token: t, logprob: l, bytes: [...new TextEncoder().encode(t)] }))
})

const chunkWith = (content: string | null, logprobs: unknown, delta: Record<string, unknown> = {}) =>
  JSON.stringify({
    id: "c",
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta: { content, ...delta }, logprobs, finish_reason: null }]
  })

const eventsOf = (...events: ReadonlyArray<string>): ReadonlyArray<RunEvent.RunEvent> =>
  feedAll([...events.map((e) => decodeEvent(undefined, e)), { _tag: "Done" }])

describe("upstream logprobs", () => {
  it("OpenAI's entries become the Delta's, bytes and top alternatives kept", () => {
    const events = eventsOf(
      chunkWith("Hello", { content: [lp("Hello", -0.01, [["Hello", -0.01], ["Hi", -4.6]])], refusal: null }),
      chunkWith(" world", { content: [lp(" world", -0.2)] })
    )
    expect(events.slice(0, 2)).toEqual([
      RunEvent.deltaWithLogprobs("Hello", [{
        token: "Hello",
        logprob: -0.01,
        bytes: [72, 101, 108, 108, 111],
        topLogprobs: [{ token: "Hello", logprob: -0.01, bytes: [72, 101, 108, 108, 111] }, {
          token: "Hi",
          logprob: -4.6,
          bytes: [72, 105]
        }]
      }]),
      RunEvent.deltaWithLogprobs(" world", [{ token: " world", logprob: -0.2, bytes: [32, 119, 111, 114, 108, 100], topLogprobs: [] }])
    ])
  })

  it("no logprobs (absent, null, empty) → a plain Delta", () => {
    for (const logprobs of [undefined, null, { content: null }, { content: [] }]) {
      expect(eventsOf(chunkWith("a", logprobs))[0]).toEqual(RunEvent.delta("a"))
    }
  })

  it("entries that do not spell the text are laid over it: `chars` where a token's length is not what it covers", () => {
    // OpenAI's byte tokens of "é" (0xc3 0xa9): the char goes with the entry holding its first byte.
    const byte = (token: string, logprob: number, b: number) => ({ token, logprob, bytes: [b], top_logprobs: [] })
    const [e] = eventsOf(chunkWith("é!", { content: [byte("bytes:\\xc3", -1, 0xc3), byte("bytes:\\xa9", -2, 0xa9), lp("!", -3)] }))
    const entries = e?._tag === "Delta" ? e.logprobs ?? [] : []
    expect(entries.map((x) => [x.token, x.chars])).toEqual([["bytes:\\xc3", 1], ["bytes:\\xa9", 0], ["!", undefined]])
    // Without bytes: each covers its token's length as far as the text goes, the last the rest.
    const [noBytes] = eventsOf(chunkWith("é!", { content: [{ token: "bytes:\\xc3", logprob: -1 }, { token: "!", logprob: -3 }] }))
    expect(noBytes?._tag === "Delta" ? noBytes.logprobs?.map((x) => x.chars) : undefined).toEqual([2, 0])
    const [short] = eventsOf(chunkWith("abc", { content: [lp("a", -1)] }))
    expect(short).toEqual(RunEvent.deltaWithLogprobs("abc", [{ token: "a", logprob: -1, bytes: [97], topLogprobs: [], chars: 3 }]))
    // An emoji is two UTF-16 units.
    const [emoji] = eventsOf(
      chunkWith("😀", { content: [byte("a", -1, 0xf0), byte("b", -2, 0x9f), byte("c", -3, 0x98), byte("d", -4, 0x80)] })
    )
    expect(emoji?._tag === "Delta" ? emoji.logprobs?.map((x) => x.chars) : undefined).toEqual([2, 0, 0, 0])
  })

  it("entries of a chunk without text wait for the next text; those of reasoning or tool-call chunks are dropped", () => {
    const events = eventsOf(
      chunkWith(null, { content: [lp("r", -5)] }, { reasoning_content: "r" }),
      chunkWith("", { content: [{ token: "bytes:\\xc3", logprob: -1, bytes: [0xc3] }] }),
      chunkWith("é", { content: [{ token: "bytes:\\xa9", logprob: -2, bytes: [0xa9] }] })
    )
    expect(events[0]).toEqual(RunEvent.reasoningDelta("r"))
    const delta = events[1]
    expect(delta?._tag === "Delta" ? delta.logprobs?.map((x) => [x.token, x.chars]) : undefined).toEqual([
      ["bytes:\\xc3", 1],
      ["bytes:\\xa9", 0]
    ])
  })

  it("nulls are accepted; a logprob of the wrong type names its field", () => {
    const [e] = eventsOf(chunkWith("a", { content: [{ token: "a", logprob: -1, bytes: null, top_logprobs: null }] }))
    expect(e).toEqual(RunEvent.deltaWithLogprobs("a", [{ token: "a", logprob: -1 }]))
    expect(decodeEvent(undefined, chunkWith("a", { content: [{ token: "a", logprob: "-1" }] }))).toEqual({
      _tag: "Malformed",
      message: "upstream sent a malformed chunk (choices.0.logprobs.content.0.logprob: expected a number or null, got string)"
    })
    expect(decodeEvent(undefined, chunkWith("a", { content: [{ token: "a", logprob: -1, bytes: ["x"] }] }))).toMatchObject({
      _tag: "Malformed"
    })
  })
})
