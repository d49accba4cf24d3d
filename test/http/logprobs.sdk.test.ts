import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type InProcessEdge, startInProcessEdge } from "../support/edgeProcess.js"
import { chunk, completionTokens, type FakeUpstream, startFakeUpstream, usageChunk } from "../support/fakeUpstream.js"

/**
 * `logprobs: true, top_logprobs: 2` through the official `openai` SDK, against an in-process edge whose model
 * points at a fake upstream: the request carries them upstream, and the upstream's entries come back (stream and
 * not), in OpenAI's shape, without the entries of text the edge did not show (an end token).
 */

const entry = (token: string, logprob: number, alt: string) => ({
  token,
  logprob,
  bytes: [...Buffer.from(token, "utf8")],
  top_logprobs: [
    { token, logprob, bytes: [...Buffer.from(token, "utf8")] },
    { token: alt, logprob: logprob - 2, bytes: [...Buffer.from(alt, "utf8")] }
  ]
})

const TOKENS = [entry("Hello", -0.01, "Hi"), entry(",", -0.5, "!"), entry(" wörld", -1.25, " there")]
const END = entry("<|im_end|>", -0.001, "<|eot_id|>")

const upstreamAnswer = (): ReadonlyArray<object> => [
  chunk({ role: "assistant", content: "", logprobs: null }),
  ...TOKENS.map((e) => chunk({ content: e.token, logprobs: { content: [e], refusal: null } })),
  chunk({ content: END.token, logprobs: { content: [END], refusal: null } }),
  chunk({ finish_reason: "stop", logprobs: null }),
  usageChunk(completionTokens(5, 4))
]

describe("logprobs through the openai SDK", () => {
  let upstream: FakeUpstream
  let edge: InProcessEdge
  let client: OpenAI

  beforeAll(async () => {
    upstream = await startFakeUpstream({ kind: "sse", events: upstreamAnswer() })
    edge = await startInProcessEdge({
      config: { models: [{ id: "model", provider: { type: "openai", baseUrl: upstream.url } }] }
    })
    client = new OpenAI({ baseURL: edge.baseURL, apiKey: "none", maxRetries: 0 })
  })
  afterAll(async () => {
    await edge?.stop()
    await upstream?.close()
  })

  const messages = [{ role: "user" as const, content: "hi" }]

  it("non-stream: choices[0].logprobs.content holds the upstream's entries; the upstream was asked for them", async () => {
    const completion = await client.chat.completions.create({ model: "model", messages, logprobs: true, top_logprobs: 2 })
    expect(completion.choices[0]?.message.content).toBe("Hello, wörld")
    expect(completion.choices[0]?.logprobs).toEqual({ content: TOKENS, refusal: null })
    expect(upstream.requests.at(-1)?.body).toMatchObject({ logprobs: true, top_logprobs: 2 })
  })

  it("stream: each content chunk carries its entries; the role and finish chunks say null", async () => {
    const stream = await client.chat.completions.create({ model: "model", messages, stream: true, logprobs: true, top_logprobs: 2 })
    const entries: Array<unknown> = []
    let content = ""
    let finish: string | null = null
    for await (const c of stream) {
      const choice = c.choices[0]
      if (choice === undefined) continue
      content += choice.delta.content ?? ""
      if (choice.finish_reason !== null) finish = choice.finish_reason
      if (choice.logprobs != null) {
        expect(choice.delta.content).not.toBe("")
        expect(choice.logprobs.refusal).toBeNull()
        entries.push(...(choice.logprobs.content ?? []))
      }
    }
    expect(content).toBe("Hello, wörld")
    expect(finish).toBe("stop")
    expect(entries).toEqual(TOKENS)
    expect(upstream.requests.at(-1)?.body).toMatchObject({ stream: true, logprobs: true, top_logprobs: 2 })
  })

  it("not asked: logprobs null, and nothing sent upstream", async () => {
    const completion = await client.chat.completions.create({ model: "model", messages })
    expect(completion.choices[0]?.logprobs).toBeNull()
    expect(upstream.requests.at(-1)?.body).not.toHaveProperty("logprobs")
    expect(upstream.requests.at(-1)?.body).not.toHaveProperty("top_logprobs")
  })
})
