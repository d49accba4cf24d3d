import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { chunk, completionTokens, type FakeUpstream, startFakeUpstream, textStream, usageChunk } from "../support/fakeUpstream.js"
import { type NatsServer, startNatsServer } from "../support/natsServer.js"
import { upstreamMessages } from "../support/toolsReasoning.js"

/**
 * Two `iop edge` processes sharing a response store on a real `nats-server -js` (JetStream key-value): a
 * conversation started on one edge continues on the other by `previous_response_id` and by `item_reference`, and
 * either edge retrieves, lists and deletes what the other stored. The edges reach the bucket through the CLI's
 * wiring (`responses.store.kind: "nats"`).
 */

const usage = completionTokens(10, 5)

let nats: NatsServer
let upstream: FakeUpstream
let a: EdgeProcess
let b: EdgeProcess

const edgeConfig = (servers: ReadonlyArray<string>) => ({
  models: [{ id: "m", provider: { type: "openai", baseUrl: upstream.url } }],
  responses: { store: { kind: "nats", bucket: "e2e_responses", ttlMs: 600_000, nats: { servers } } }
})

beforeAll(async () => {
  nats = await startNatsServer({ jetstream: true })
  // The first request of a conversation reasons and calls a tool; every other is answered with text.
  upstream = await startFakeUpstream((request) => {
    const messages = upstreamMessages(request.body)
    return messages.at(-1)?.content === "weather in Oslo?"
      ? {
        kind: "sse",
        events: [
          chunk({ role: "assistant", content: "" }),
          chunk({ reasoning_content: "Call the weather tool." }),
          chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }] }),
          chunk({ finish_reason: "tool_calls" }),
          usageChunk(usage)
        ]
      }
      : { kind: "sse", events: textStream(["Sunny."], { usage }) }
  })
  ;[a, b] = await Promise.all([startEdge({ config: edgeConfig([nats.url]) }), startEdge({ config: edgeConfig([nats.url]) })])
})

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()])
  await upstream?.close()
  await nats?.stop()
})

const client = (edge: EdgeProcess) => new OpenAI({ baseURL: edge.baseURL, apiKey: "x", maxRetries: 0 })
const weather = { type: "function" as const, name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: false }

describe("two edges sharing a JetStream key-value response store", () => {
  it("a conversation started on edge A continues on edge B by previous_response_id; B reads, lists and deletes A's response", async () => {
    const first = await client(a).responses.create({ model: "m", instructions: "Be brief.", input: "weather in Oslo?", tools: [weather] })
    expect(first.output.map((o) => o.type)).toEqual(["reasoning", "function_call"])
    const before = upstream.requests.length
    const second = await client(b).responses.create({
      model: "m",
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: "call_1", output: "sunny" }]
    })
    expect(second.output_text).toBe("Sunny.")
    expect(upstreamMessages(upstream.requests[before]?.body)).toEqual([
      { role: "user", content: "weather in Oslo?" },
      {
        role: "assistant",
        content: null,
        reasoning_content: "Call the weather tool.",
        tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }]
      },
      { role: "tool", tool_call_id: "call_1", content: "sunny" }
    ])
    // Either edge reads what the other stored.
    expect((await client(b).responses.retrieve(first.id)).output).toEqual(first.output)
    const items = await client(a).responses.inputItems.list(second.id, { order: "asc" })
    expect(items.data.map((i) => i.type)).toEqual(["message", "reasoning", "function_call", "function_call_output"])
    await client(b).responses.delete(first.id)
    await expect(client(a).responses.retrieve(first.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError)
    await expect(
      client(a).responses.create({ model: "m", previous_response_id: first.id, input: "again" })
    ).rejects.toMatchObject({ status: 400, code: "previous_response_not_found" })
  })

  it("a stream stored by edge B is referred to, item by item, on edge A as soon as it ended", async () => {
    const stream = await client(b).responses.create({ model: "m", input: "weather in Oslo?", tools: [weather], stream: true })
    let completed: OpenAI.Responses.Response | undefined
    for await (const event of stream) if (event.type === "response.completed") completed = event.response
    if (completed === undefined) return expect.unreachable("no response.completed")
    const before = upstream.requests.length
    await client(a).responses.create({
      model: "m",
      input: [
        { role: "user", content: "weather in Oslo?" },
        ...completed.output.map((o) => ({ type: "item_reference" as const, id: o.id ?? "" })),
        { type: "function_call_output", call_id: "call_1", output: "sunny" }
      ]
    })
    expect(upstreamMessages(upstream.requests[before]?.body)[1]).toMatchObject({ role: "assistant", reasoning_content: "Call the weather tool." })
  })

  it("an edge whose NATS has no JetStream does not start: it says why and exits", async () => {
    const plain = await startNatsServer()
    try {
      await expect(startEdge({ config: edgeConfig([plain.url]) })).rejects.toThrow(/cannot open the key-value bucket 'e2e_responses'/)
    } finally {
      await plain.stop()
    }
  })
})
