import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectDoneOnce, postJson, readSse, jsonOf } from "../support/e2e.js"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"

/** The built-in echo model over HTTP: OpenAI JSON and SSE shapes, models list, health, request ids. */

const TEXT = "Hello there, world! Streaming tokens back one by one."

describe("echo model", () => {
  let edge: EdgeProcess
  let client: OpenAI

  beforeAll(async () => {
    edge = await startEdge({
      config: {
        models: [
          { id: "echo", provider: { type: "echo", tokenDelayMs: 0 } },
          { id: "echo-2", provider: { type: "echo", tokenDelayMs: 0 } }
        ]
      }
    })
    client = new OpenAI({ baseURL: edge.baseURL, apiKey: "x", maxRetries: 0 })
  })
  afterAll(async () => {
    await edge?.stop()
  })

  it("streams the last user message back: role first, content reassembles, stop finish chunk with empty delta", async () => {
    const stream = await client.chat.completions.create({
      model: "echo",
      stream: true,
      messages: [
        { role: "system", content: "You are an echo." },
        { role: "user", content: "an earlier message" },
        { role: "assistant", content: "an earlier answer" },
        { role: "user", content: TEXT }
      ]
    })
    const chunks: Array<OpenAI.Chat.Completions.ChatCompletionChunk> = []
    for await (const c of stream) chunks.push(c)

    expect(chunks.length).toBeGreaterThan(2)
    for (const c of chunks) {
      expect(c.object).toBe("chat.completion.chunk")
      expect(c.model).toBe("echo")
      expect(c.id).toBe(chunks[0]!.id)
      expect(c.choices).toHaveLength(1)
      expect(c.choices[0]!.index).toBe(0)
    }
    const first = chunks[0]!.choices[0]!
    expect(first.delta.role).toBe("assistant")
    expect(first.delta.content ?? "").toBe("")
    expect(first.finish_reason).toBeNull()

    const last = chunks[chunks.length - 1]!.choices[0]!
    expect(last.finish_reason).toBe("stop")
    expect(last.delta).toEqual({})
    // Only the last chunk finishes.
    expect(chunks.slice(0, -1).every((c) => c.choices[0]!.finish_reason === null)).toBe(true)

    const content = chunks.map((c) => c.choices[0]!.delta.content ?? "").join("")
    expect(content).toBe(TEXT)
    // The unpaced echo's tokens arrive together, and deltas that arrive together go out as one chunk.
    expect(chunks.filter((c) => (c.choices[0]!.delta.content ?? "") !== "").length).toBeGreaterThanOrEqual(1)
  })

  it("SSE bytes: text/event-stream, every event `data: <json>\\n\\n`, [DONE] exactly once at the end", async () => {
    const response = await postJson(`${edge.baseURL}/chat/completions`, {
      model: "echo",
      stream: true,
      messages: [{ role: "user", content: TEXT }]
    })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/)
    const sse = await readSse(response)
    expectDoneOnce(sse)
    expect(sse.events[0].choices[0].delta.role).toBe("assistant")
    expect(sse.events.map((e) => e.choices[0].delta.content ?? "").join("")).toBe(TEXT)
    const finishes = sse.events.filter((e) => e.choices[0].finish_reason !== null)
    expect(finishes).toHaveLength(1)
    expect(sse.events[sse.events.length - 1]).toBe(finishes[0])
    expect(sse.events.some((e) => "error" in e)).toBe(false)
  })

  it("stream_options.include_usage adds one chunk with choices: [] and usage after the finish chunk", async () => {
    const response = await postJson(`${edge.baseURL}/chat/completions`, {
      model: "echo",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: TEXT }]
    })
    const sse = await readSse(response)
    expectDoneOnce(sse)
    const n = sse.events.length
    const finish = sse.events[n - 2]
    const usageChunk = sse.events[n - 1]
    expect(finish.choices[0].finish_reason).toBe("stop")
    expect(finish.choices[0].delta).toEqual({})
    expect(usageChunk.choices).toEqual([])
    expect(usageChunk.usage.prompt_tokens).toBeGreaterThan(0)
    expect(usageChunk.usage.completion_tokens).toBeGreaterThan(0)
    expect(usageChunk.usage.total_tokens).toBe(usageChunk.usage.prompt_tokens + usageChunk.usage.completion_tokens)
    // Only one usage chunk, and no chunk before it carries usage.
    expect(sse.events.filter((e) => e.usage != null)).toHaveLength(1)

    // The SDK sees the same.
    const stream = await client.chat.completions.create({
      model: "echo",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: TEXT }]
    })
    const chunks: Array<OpenAI.Chat.Completions.ChatCompletionChunk> = []
    for await (const c of stream) chunks.push(c)
    expect(chunks[chunks.length - 1]!.choices).toEqual([])
    expect(chunks[chunks.length - 1]!.usage?.completion_tokens).toBeGreaterThan(0)
    expect(chunks[chunks.length - 2]!.choices[0]!.finish_reason).toBe("stop")
  })

  it("without include_usage no chunk carries usage", async () => {
    const sse = await readSse(
      await postJson(`${edge.baseURL}/chat/completions`, {
        model: "echo",
        stream: true,
        messages: [{ role: "user", content: "no usage please" }]
      })
    )
    expect(sse.events.every((e) => e.usage == null && e.choices.length === 1)).toBe(true)
  })

  it("non-stream echo: chat.completion with the text, finish stop and usage", async () => {
    const completion = await client.chat.completions.create({
      model: "echo",
      messages: [{ role: "user", content: TEXT }]
    })
    expect(completion.object).toBe("chat.completion")
    expect(completion.model).toBe("echo")
    expect(completion.id).toMatch(/\S/)
    expect(completion.choices).toHaveLength(1)
    expect(completion.choices[0]!.message.role).toBe("assistant")
    expect(completion.choices[0]!.message.content).toBe(TEXT)
    expect(completion.choices[0]!.finish_reason).toBe("stop")
    expect(completion.usage?.prompt_tokens).toBeGreaterThan(0)
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0)
    expect(completion.usage?.total_tokens).toBe(completion.usage!.prompt_tokens + completion.usage!.completion_tokens)
  })

  it("content-part array messages: the text parts of the last user message are echoed", async () => {
    const completion = await client.chat.completions.create({
      model: "echo",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Part one." },
            { type: "text", text: "Part two." }
          ]
        }
      ]
    })
    const content = completion.choices[0]!.message.content ?? ""
    expect(content).toContain("Part one.")
    expect(content).toContain("Part two.")
    expect(content.indexOf("Part one.")).toBeLessThan(content.indexOf("Part two."))

    const stream = await client.chat.completions.create({
      model: "echo",
      stream: true,
      messages: [{ role: "user", content: [{ type: "text", text: "Only part." }] }]
    })
    let streamed = ""
    for await (const c of stream) streamed += c.choices[0]?.delta.content ?? ""
    expect(streamed).toBe("Only part.")
  })

  it("max_tokens cuts the answer short with finish_reason length (non-stream and stream)", async () => {
    const completion = await client.chat.completions.create({
      model: "echo",
      max_tokens: 2,
      messages: [{ role: "user", content: TEXT }]
    })
    expect(completion.choices[0]!.finish_reason).toBe("length")
    const content = completion.choices[0]!.message.content ?? ""
    expect(content.length).toBeGreaterThan(0)
    expect(content.length).toBeLessThan(TEXT.length)
    expect(TEXT.startsWith(content)).toBe(true)
    expect(completion.usage?.completion_tokens).toBe(2)

    const stream = await client.chat.completions.create({
      model: "echo",
      stream: true,
      max_completion_tokens: 3,
      messages: [{ role: "user", content: TEXT }]
    })
    const chunks: Array<OpenAI.Chat.Completions.ChatCompletionChunk> = []
    for await (const c of stream) chunks.push(c)
    const last = chunks[chunks.length - 1]!.choices[0]!
    expect(last.finish_reason).toBe("length")
    expect(last.delta).toEqual({})
    const streamed = chunks.map((c) => c.choices[0]!.delta.content ?? "").join("")
    expect(streamed.length).toBeLessThan(TEXT.length)
    expect(TEXT.startsWith(streamed)).toBe(true)
  })

  it("unknown request fields are accepted and ignored", async () => {
    const response = await postJson(`${edge.baseURL}/chat/completions`, {
      model: "echo",
      messages: [{ role: "user", content: "hi" }],
      some_future_field: { nested: [1, 2, 3] },
      user: "someone",
      logit_bias: {}
    })
    expect(response.status).toBe(200)
    const body = await jsonOf(response)
    expect(body.choices[0].message.content).toBe("hi")
  })

  it("GET /v1/models lists the configured model ids in the OpenAI list shape", async () => {
    const page = await client.models.list()
    expect(page.data.map((m) => m.id)).toEqual(["echo", "echo-2"])
    for (const m of page.data) expect(m.object).toBe("model")
    // models.retrieve: one model; an unknown one is the SDK's NotFoundError (404, model_not_found).
    expect(await client.models.retrieve("echo-2")).toMatchObject({ id: "echo-2", object: "model" })
    const missing = await client.models.retrieve("nope").then(() => "found", (e: unknown) => e)
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError)

    const raw = await jsonOf(await fetch(`${edge.baseURL}/models`))
    expect(raw.object).toBe("list")
    expect(raw.data.map((m: { id: string }) => m.id)).toEqual(["echo", "echo-2"])
  })

  it("GET /healthz answers 200 once the edge serves", async () => {
    const response = await fetch(`${edge.url}/healthz`)
    expect(response.status).toBe(200)
  })

  it("GET /metrics is Prometheus text with iop_chat_requests_total by model and outcome", async () => {
    const response = await fetch(`${edge.url}/metrics`)
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^text\/plain/)
    const text = await response.text()
    expect(text).toMatch(/^# HELP iop_chat_requests_total /m)
    expect(text).toMatch(/^# TYPE iop_chat_requests_total counter$/m)
    expect(text).toMatch(/^iop_chat_requests_total\{[^}]*model="echo"[^}]*outcome="success"[^}]*\} \d+/m)
  })

  it("without server.apiKeys no authentication is needed: any key or none", async () => {
    const raw = await postJson(`${edge.baseURL}/chat/completions`, { model: "echo", messages: [{ role: "user", content: "open" }] })
    expect(raw.status).toBe(200)
    expect((await jsonOf(raw)).choices[0].message.content).toBe("open")
    const other = new OpenAI({ baseURL: edge.baseURL, apiKey: "sk-anything", maxRetries: 0 })
    expect((await other.models.list()).data.length).toBe(2)
  })

  it("server.maxBodyBytes defaults to 4 MiB: a larger body is a 413", async () => {
    const body = JSON.stringify({ model: "echo", messages: [{ role: "user", content: "x".repeat(4 * 1024 * 1024) }] })
    const response = await postJson(`${edge.baseURL}/chat/completions`, body)
    expect(response.status).toBe(413)
    expect((await jsonOf(response)).error.type).toBe("invalid_request_error")
  })

  it("X-Request-Id is echoed back when the client sends one", async () => {
    const response = await postJson(
      `${edge.baseURL}/chat/completions`,
      { model: "echo", messages: [{ role: "user", content: "id" }] },
      { "x-request-id": "req-e2e-1234" }
    )
    expect(response.headers.get("x-request-id")).toBe("req-e2e-1234")
    await response.text()

    const stream = await postJson(
      `${edge.baseURL}/chat/completions`,
      { model: "echo", stream: true, messages: [{ role: "user", content: "id" }] },
      { "x-request-id": "req-e2e-stream" }
    )
    expect(stream.headers.get("x-request-id")).toBe("req-e2e-stream")
    await stream.text()

    // Error responses carry it too.
    const bad = await postJson(`${edge.baseURL}/chat/completions`, "nope", { "x-request-id": "req-e2e-bad" })
    expect(bad.status).toBe(400)
    expect(bad.headers.get("x-request-id")).toBe("req-e2e-bad")
    await bad.text()
  })

  it("X-Request-Id is generated when absent, different for each request", async () => {
    const a = await postJson(`${edge.baseURL}/chat/completions`, { model: "echo", messages: [{ role: "user", content: "a" }] })
    const b = await postJson(`${edge.baseURL}/chat/completions`, { model: "echo", messages: [{ role: "user", content: "b" }] })
    await Promise.all([a.text(), b.text()])
    const idA = a.headers.get("x-request-id")
    const idB = b.headers.get("x-request-id")
    expect(idA, "x-request-id header").not.toBeNull()
    expect(idA).toMatch(/^\S{8,}$/)
    expect(idB).toMatch(/^\S{8,}$/)
    expect(idA).not.toBe(idB)
  })
})
