import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Mapper from "../../../src/providers/openai/toRunEvents.js"
import { feedAll } from "./feedAll.js"
import {
  clipBytes,
  decodeChunk,
  decodeEvent,
  errorBodyCode,
  errorBodyMessage,
  retryAfterSeconds,
  scrubSecrets,
  upstreamText
} from "../../../src/providers/openai/upstreamWire.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"

describe("upstreamWire", () => {
  it("errorBodyMessage: the upstream's message in the shapes servers use, else the body text", () => {
    expect(errorBodyMessage("{\"error\":{\"message\":\"model not found\",\"type\":\"invalid_request_error\"}}")).toBe(
      "model not found"
    )
    expect(errorBodyMessage("{\"error\":\"model 'x' not found, try pulling it first\"}")).toBe(
      "model 'x' not found, try pulling it first"
    )
    expect(errorBodyMessage("{\"object\":\"error\",\"message\":\"too long\",\"code\":400}")).toBe("too long")
    expect(errorBodyMessage("{\"detail\":\"Not Found\"}")).toBe("Not Found")
    expect(errorBodyMessage("\"quoted\"")).toBe("quoted")
    expect(errorBodyMessage("<html>Bad Gateway</html>\n")).toBe("<html>Bad Gateway</html>")
    expect(errorBodyMessage("")).toBe("no error message")
    expect(errorBodyMessage("{\"error\":{\"message\":\"\"}}")).toBe("{\"error\":{\"message\":\"\"}}")
    expect(errorBodyMessage("y".repeat(1000), 10)).toBe("yyyyyyyyyy…")
  })

  it("decodeEvent: [DONE], keep-alive data, unknown keys ignored, nulls accepted", () => {
    expect(decodeEvent(undefined, "[DONE]")).toEqual({ _tag: "Done" })
    expect(decodeEvent(undefined, "")).toEqual({ _tag: "Chunk", chunk: {} })
    const decoded = decodeEvent(
      undefined,
      "{\"id\":null,\"model\":null,\"choices\":null,\"usage\":null,\"timings\":{\"x\":1},\"obfuscation\":\"q\"}"
    )
    expect(decoded).toEqual({ _tag: "Chunk", chunk: { id: null, model: null, choices: null, usage: null } })
  })

  it("decodeEvent: content parts are accepted", () => {
    const decoded = decodeEvent(undefined, "{\"choices\":[{\"delta\":{\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}}]}")
    expect(decoded._tag).toBe("Chunk")
  })
})

const chunkOf = (json: unknown) => decodeEvent(undefined, JSON.stringify(json))

const malformed = (why: string) => ({ _tag: "Malformed", message: `upstream sent a malformed chunk (${why})` })

describe("decodeEvent: field guards, no Schema", () => {
  it("every shape servers send", () => {
    expect(chunkOf({
      id: "c",
      object: "chat.completion.chunk",
      model: "m",
      choices: [{
        index: 0,
        delta: {
          role: "assistant",
          content: [{ type: "text", text: "a" }],
          reasoning_content: "r",
          reasoning: null,
          refusal: "no",
          tool_calls: [{ index: 0, id: "t", type: "function", function: { name: "f", arguments: { a: 1 } } }]
        },
        logprobs: null,
        finish_reason: "tool_calls",
        stop_reason: null
      }],
      usage: {
        prompt_tokens: 3,
        completion_tokens: 2,
        total_tokens: 5,
        prompt_tokens_details: { cached_tokens: 1, audio_tokens: 0 },
        completion_tokens_details: null
      },
      system_fingerprint: "fp"
    })).toEqual({
      _tag: "Chunk",
      chunk: {
        id: "c",
        object: "chat.completion.chunk",
        model: "m",
        choices: [{
          index: 0,
          delta: {
            role: "assistant",
            content: [{ type: "text", text: "a" }],
            reasoning_content: "r",
            reasoning: null,
            refusal: "no",
            tool_calls: [{ index: 0, id: "t", type: "function", function: { name: "f", arguments: { a: 1 } } }]
          },
          logprobs: null,
          finish_reason: "tool_calls"
        }],
        usage: {
          prompt_tokens: 3,
          completion_tokens: 2,
          total_tokens: 5,
          prompt_tokens_details: { cached_tokens: 1 },
          completion_tokens_details: null
        }
      }
    })
    expect(chunkOf({ error: "plain" })).toEqual({ _tag: "Chunk", chunk: { error: "plain" } })
    expect(chunkOf({ error: { message: "m", type: "t", code: 400, param: null } })).toEqual({
      _tag: "Chunk",
      chunk: { error: { message: "m", type: "t", code: 400 } }
    })
    expect(chunkOf({ object: "error", message: "old vllm", code: 400 })).toEqual({
      _tag: "Chunk",
      chunk: { object: "error", message: "old vllm" }
    })
  })

  it("fields the mapper never reads are dropped when their type is odd, not a failure", () => {
    expect(chunkOf({
      id: 5,
      choices: [{ delta: { role: 1, content: "a", tool_calls: [{ type: 3, index: 0 }] } }],
      usage: { total_tokens: "x", prompt_tokens: 1 },
      error: { message: "e", type: 9 }
    })).toEqual({
      _tag: "Chunk",
      chunk: {
        choices: [{ delta: { content: "a", tool_calls: [{ index: 0 }] } }],
        usage: { prompt_tokens: 1 },
        error: { message: "e" }
      }
    })
  })

  it("a malformed shape names the field, its expected type and what came", () => {
    expect(chunkOf([])).toEqual(malformed("chunk: expected an object, got an array"))
    expect(chunkOf(42)).toEqual(malformed("chunk: expected an object, got number"))
    expect(chunkOf(null)).toEqual(malformed("chunk: expected an object, got null"))
    expect(chunkOf("text")).toEqual(malformed("chunk: expected an object, got string"))
    expect(chunkOf({ choices: "x" })).toEqual(malformed("choices: expected an array or null, got string"))
    expect(chunkOf({ choices: {} })).toEqual(malformed("choices: expected an array or null, got an object"))
    expect(chunkOf({ choices: [1] })).toEqual(malformed("choices.0: expected an object, got number"))
    expect(chunkOf({ choices: [{}, { index: "1" }] })).toEqual(
      malformed("choices.1.index: expected a number or null, got string")
    )
    expect(chunkOf({ choices: [{ delta: "x" }] })).toEqual(
      malformed("choices.0.delta: expected an object or null, got string")
    )
    expect(chunkOf({ choices: [{ delta: { content: 42 } }] })).toEqual(
      malformed("choices.0.delta.content: expected a string, an array of parts or null, got number")
    )
    expect(chunkOf({ choices: [{ delta: { reasoning_content: {} } }] })).toEqual(
      malformed("choices.0.delta.reasoning_content: expected a string or null, got an object")
    )
    expect(chunkOf({ choices: [{ delta: { tool_calls: {} } }] })).toEqual(
      malformed("choices.0.delta.tool_calls: expected an array or null, got an object")
    )
    expect(chunkOf({ choices: [{ delta: { tool_calls: [{ function: { name: 7 } }] } }] })).toEqual(
      malformed("choices.0.delta.tool_calls.0.function.name: expected a string or null, got number")
    )
    expect(chunkOf({ choices: [{ finish_reason: false }] })).toEqual(
      malformed("choices.0.finish_reason: expected a string or null, got boolean")
    )
    expect(chunkOf({ usage: { prompt_tokens: "5" } })).toEqual(
      malformed("usage.prompt_tokens: expected a number or null, got string")
    )
    expect(chunkOf({ usage: { completion_tokens_details: { reasoning_tokens: true } } })).toEqual(
      malformed("usage.completion_tokens_details.reasoning_tokens: expected a number or null, got boolean")
    )
    expect(chunkOf({ error: 42 })).toEqual(malformed("error: expected a string, an object or null, got number"))
    expect(chunkOf({ error: { message: [] } })).toEqual(
      malformed("error.message: expected a string or null, got an array")
    )
    expect(chunkOf({ model: 1 })).toEqual(malformed("model: expected a string or null, got number"))
  })

  it("a malformed shape becomes the run's Failed with that message", () => {
    expect(feedAll([chunkOf({ choices: [{ delta: { content: "a" } }] }), chunkOf({ choices: 1 })])).toEqual([
      RunEvent.delta("a"),
      RunEvent.failed("upstream sent a malformed chunk (choices: expected an array or null, got number)")
    ])
  })

  it("decodeChunk answers the problem as text and a chunk otherwise", () => {
    expect(decodeChunk({ choices: null })).toEqual({ choices: null })
    expect(decodeChunk(true)).toBe("chunk: expected an object, got boolean")
  })

  const nullable = <A>(arb: fc.Arbitrary<A>) => fc.option(arb, { nil: null })
  const str = nullable(fc.string({ maxLength: 5 }))
  const num = nullable(fc.integer())
  const toolCall = fc.record({
    index: num,
    id: str,
    type: str,
    function: nullable(fc.record({ name: str, arguments: fc.jsonValue({ maxDepth: 2 }) }, { requiredKeys: [] }))
  }, { requiredKeys: [] })
  const delta = fc.record({
    role: str,
    content: nullable(fc.oneof(fc.string({ maxLength: 5 }), fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }))),
    reasoning_content: str,
    reasoning: str,
    refusal: str,
    tool_calls: nullable(fc.array(toolCall, { maxLength: 3 }))
  }, { requiredKeys: [] })
  // `timings` is read leniently (llama.cpp's cache figure): not an unknown key.
  const extraKey = fc.string({ maxLength: 8 }).filter((k) => !knownKeys.includes(k) && k !== "__proto__" && k !== "timings")
  const extras = fc.dictionary(extraKey, fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 })
  const choice = fc.tuple(
    fc.record({ index: num, delta: nullable(delta), finish_reason: str }, { requiredKeys: [] }),
    extras
  )
  const usage = fc.record({
    prompt_tokens: num,
    completion_tokens: num,
    total_tokens: num,
    prompt_tokens_details: nullable(fc.record({ cached_tokens: num }, { requiredKeys: [] })),
    completion_tokens_details: nullable(fc.record({ reasoning_tokens: num }, { requiredKeys: [] }))
  }, { requiredKeys: [] })
  const errorDetail = fc.oneof(
    fc.string({ maxLength: 5 }),
    fc.record({ message: str, type: str, code: fc.jsonValue({ maxDepth: 1 }) }, { requiredKeys: [] })
  )
  const wellFormed = fc.tuple(
    fc.record({
      id: str,
      object: str,
      model: str,
      choices: nullable(fc.array(choice, { maxLength: 3 })),
      usage: nullable(usage),
      error: nullable(errorDetail),
      message: str
    }, { requiredKeys: [] }),
    extras
  )

  type WellFormed = (typeof wellFormed) extends fc.Arbitrary<infer A> ? A : never
  /** What the upstream sends: the fields with unknown keys mixed in (at the top and in each choice). */
  const sentOf = ([fields, topExtras]: WellFormed) => {
    const { choices, ...rest } = fields
    return {
      ...topExtras,
      ...rest,
      ...(choices !== undefined ? { choices: choices?.map(([c, more]) => ({ ...more, ...c })) ?? null } : {})
    }
  }
  /** What the decoder should make of it: the fields alone. */
  const bareOf = ([fields]: WellFormed) => {
    const { choices, ...rest } = fields
    return { ...rest, ...(choices !== undefined ? { choices: choices?.map(([c]) => c) ?? null } : {}) }
  }

  // Objects built from the keys the decoder knows, holding anything: the shapes that reach every guard.
  const knownKeys = [
    "id", "object", "model", "choices", "usage", "error", "message", "index", "delta", "finish_reason", "role",
    "content", "reasoning_content", "reasoning", "refusal", "tool_calls", "type", "function", "name", "arguments",
    "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details",
    "cached_tokens", "reasoning_tokens", "code", "text"
  ]
  const shapeish: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
    value: fc.oneof({ depthSize: "small", maxDepth: 5 }, fc.jsonValue({ maxDepth: 1 }), tie("object"), tie("array")),
    object: fc.dictionary(fc.constantFrom(...knownKeys), tie("value"), { maxKeys: 6 }),
    array: fc.array(tie("value"), { maxLength: 3 })
  })).value

  /** The JSON of a well-formed chunk with one of its values (any depth) replaced by any JSON value. */
  const corrupted = fc.tuple(wellFormed, fc.nat(), fc.jsonValue({ maxDepth: 2 })).map(([chunk, at, junk]) => {
    let n = 0
    const nodes = (value: unknown): number =>
      typeof value === "object" && value !== null
        ? Object.values(value).reduce((count: number, v) => count + nodes(v), 1)
        : 1
    const json: unknown = JSON.parse(JSON.stringify(sentOf(chunk)))
    const target = at % nodes(json)
    const replace = (value: unknown): unknown => {
      if (n++ === target) return junk
      if (Array.isArray(value)) return value.map(replace)
      if (typeof value === "object" && value !== null) {
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replace(v)]))
      }
      return value
    }
    return replace(json)
  })

  const anyJson = fc.oneof(fc.jsonValue(), shapeish, corrupted)

  it.prop(
    "any JSON value: decoding never throws, and mapping what it gives ends in exactly one terminal event",
    [anyJson],
    ([value]) => {
      const input = decodeEvent(undefined, JSON.stringify(value) ?? "null")
      expect(["Chunk", "Malformed", "Done"]).toContain(input._tag)
      if (input._tag === "Malformed") {
        expect(input.message).toMatch(/^upstream sent a malformed chunk \(\S+: expected .+, got .+\)/)
      }
      const events = feedAll([input, Mapper.END])
      expect(events.filter(RunEvent.isTerminal)).toHaveLength(1)
      expect(RunEvent.isTerminal(events.at(-1)!)).toBe(true)
    },
    { fastCheck: { numRuns: 3000 } }
  )

  it.prop(
    "any text: decoding never throws",
    [fc.string(), fc.option(fc.constantFrom("error", "message"))],
    ([data, event]) => {
      const input = decodeEvent(event ?? undefined, data)
      expect(["Chunk", "Malformed", "Done"]).toContain(input._tag)
    },
    { fastCheck: { numRuns: 2000 } }
  )

  it.prop(
    "a well-formed chunk decodes to itself, whatever unknown keys come with it",
    [wellFormed],
    ([chunk]) => {
      expect(decodeEvent(undefined, JSON.stringify(sentOf(chunk)))).toEqual({
        _tag: "Chunk",
        chunk: JSON.parse(JSON.stringify(bareOf(chunk)))
      })
    },
    { fastCheck: { numRuns: 2000 } }
  )

})

describe("upstreamWire: upstream error text", () => {
  it("errorBodyCode: the upstream's string error code, if it is a short token", () => {
    expect(errorBodyCode("{\"error\":{\"message\":\"m\",\"code\":\"context_length_exceeded\"}}")).toBe("context_length_exceeded")
    expect(errorBodyCode("{\"error\":{\"message\":\"m\",\"code\":400}}")).toBeUndefined()
    expect(errorBodyCode("{\"error\":{\"message\":\"m\",\"code\":null}}")).toBeUndefined()
    expect(errorBodyCode("{\"error\":{\"message\":\"m\",\"code\":\"has spaces and {json}\"}}")).toBeUndefined()
    expect(errorBodyCode(`{"error":{"message":"m","code":"${"x".repeat(65)}"}}`)).toBeUndefined()
    expect(errorBodyCode("{\"error\":\"text\"}")).toBeUndefined()
    expect(errorBodyCode("{\"detail\":\"Not Found\"}")).toBeUndefined()
    expect(errorBodyCode("not json")).toBeUndefined()
  })

  it("errorBodyCode: a prompt past the context is context_length_exceeded, in each server's words", () => {
    // llama.cpp: its own error type, a numeric code.
    expect(errorBodyCode(JSON.stringify({
      error: { code: 400, message: "the request exceeds the available context size, try increasing it", type: "exceed_context_size_error", n_prompt_tokens: 9000, n_ctx: 8192 }
    }))).toBe("context_length_exceeded")
    // vLLM: a message, a numeric code; its older unwrapped shape too.
    const vllm = "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens in the messages."
    expect(errorBodyCode(JSON.stringify({ error: { message: vllm, type: "BadRequestError", code: 400 } }))).toBe("context_length_exceeded")
    expect(errorBodyCode(JSON.stringify({ object: "error", message: vllm, type: "BadRequestError", code: 400 }))).toBe("context_length_exceeded")
    // Another 400 keeps no code.
    expect(errorBodyCode(JSON.stringify({ error: { message: "temperature must be <= 2", type: "invalid_request_error", code: 400 } }))).toBeUndefined()
  })

  it("retryAfterSeconds: delta-seconds (rounded up, at least 1), else retry-after-ms; dates and junk ignored", () => {
    expect(retryAfterSeconds("7", undefined)).toBe(7)
    expect(retryAfterSeconds(" 2.5 ", undefined)).toBe(3)
    expect(retryAfterSeconds("0", undefined)).toBe(1)
    expect(retryAfterSeconds(["4", "9"], undefined)).toBe(4)
    expect(retryAfterSeconds(undefined, "1500")).toBe(2)
    expect(retryAfterSeconds(undefined, "20")).toBe(1)
    expect(retryAfterSeconds("5", "100")).toBe(5)
    expect(retryAfterSeconds("Wed, 21 Oct 2015 07:28:00 GMT", undefined)).toBeUndefined()
    expect(retryAfterSeconds("-1", "soon")).toBeUndefined()
    expect(retryAfterSeconds("999999", undefined)).toBeUndefined()
    expect(retryAfterSeconds(undefined, undefined)).toBeUndefined()
  })

  it("scrubSecrets: the configured key, Bearer tokens and sk-… tokens are redacted", () => {
    expect(scrubSecrets("bad header: Authorization: Bearer sk-up-123456", "sk-up-123456")).toBe(
      "bad header: Authorization: Bearer [redacted]"
    )
    expect(scrubSecrets("key plainsecretvalue was refused", "plainsecretvalue")).toBe("key [redacted] was refused")
    expect(scrubSecrets("{\"auth\":\"Bearer abc.def\"}", undefined)).toBe("{\"auth\":\"Bearer [redacted]\"}")
    expect(scrubSecrets("Incorrect API key provided: sk-proj-AbC123xyz.", undefined)).toBe("Incorrect API key provided: [redacted].")
    expect(scrubSecrets("task-1234 and disk-full stay", undefined)).toBe("task-1234 and disk-full stay")
    expect(scrubSecrets("nothing here", "")).toBe("nothing here")
  })

  it("clipBytes / upstreamText: at most 1 KiB of UTF-8, cut between characters, the key never survives a cut", () => {
    expect(clipBytes("short", 1024)).toBe("short")
    const ascii = clipBytes("a".repeat(5000), 1024)
    expect(new TextEncoder().encode(ascii).length).toBeLessThanOrEqual(1024)
    expect(ascii.endsWith("…")).toBe(true)
    const wide = clipBytes("é😀".repeat(1000), 1024)
    expect(new TextEncoder().encode(wide).length).toBeLessThanOrEqual(1024)
    expect(wide).not.toContain("\uFFFD")
    expect(wide.slice(0, -1)).toBe("é😀".repeat(1000).slice(0, wide.length - 1))
    const key = "k3y-" + "z".repeat(40)
    const text = upstreamText(`${"x".repeat(1000)} ${key}`, key)
    expect(new TextEncoder().encode(text).length).toBeLessThanOrEqual(1024)
    expect(text).not.toContain("k3y-zz")
  })

  it.prop(
    "upstreamText never contains the key and is at most 1 KiB",
    [fc.string({ maxLength: 2000 }), fc.string({ minLength: 8, maxLength: 40 }).filter((k) => k.trim() === k && !"Bearer [redacted]".includes(k))],
    ([text, key]) => {
      const out = upstreamText(`${text}${key}${text}Bearer ${key}`, key)
      expect(out.includes(key)).toBe(false)
      expect(new TextEncoder().encode(out).length).toBeLessThanOrEqual(1024)
    }
  )
})
