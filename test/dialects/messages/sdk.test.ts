import Anthropic from "@anthropic-ai/sdk"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { chunk, completionTokens, textStream } from "../../support/fakeUpstream.js"
import { caught, messagesEdge, upstreamBody } from "./edge.js"
import { parseEvents } from "./sse.js"

/**
 * `POST /v1/messages` end to end through the official `@anthropic-ai/sdk` against an in-process edge whose models
 * point at a scripted OpenAI-compatible upstream.
 */

const hi = [{ role: "user" as const, content: "hi" }]

const weather = {
  name: "get_weather",
  description: "The weather in a city",
  input_schema: { type: "object" as const, properties: { city: { type: "string" } }, required: ["city"] }
}

const apiError = (result: Either.Either<unknown, unknown>): InstanceType<typeof Anthropic.APIError> => {
  const error = Either.isLeft(result) ? result.left : undefined
  expect(error).toBeInstanceOf(Anthropic.APIError)
  return error instanceof Anthropic.APIError ? error : expect.unreachable("not an APIError")
}

const nativeCall = (args: string, id = "call_abc") => [
  chunk({ role: "assistant", tool_calls: [{ index: 0, id, type: "function", function: { name: "get_weather", arguments: args } }] }),
  chunk({ finish_reason: "tool_calls" })
]

describe("Messages API through @anthropic-ai/sdk", () => {
  it.scopedLive("messages.create: text, end_turn, usage (cache reads apart); the upstream gets system, messages, max_tokens, usage asked", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({
        kind: "sse",
        events: textStream(["Hello", " world"], { usage: completionTokens(12, 3, { cached: 4 }) })
      })
      const message = yield* Effect.promise(() =>
        edge.client().messages.create({ model: "claude-sonnet-4-5", max_tokens: 64, system: "be brief", messages: hi })
      )
      expect(message).toMatchObject({
        type: "message",
        role: "assistant",
        model: "claude-sonnet-4-5",
        content: [{ type: "text", text: "Hello world" }],
        stop_reason: "end_turn",
        stop_sequence: null,
        usage: { input_tokens: 8, output_tokens: 3, cache_read_input_tokens: 4 }
      })
      expect(message.id).toMatch(/^msg_/)
      expect(upstreamBody(edge.up)).toMatchObject({
        model: "model",
        messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hi" }],
        max_tokens: 64,
        stream: false
      })
      const metrics = yield* Effect.promise(() => fetch(`${edge.url}/metrics`).then((r) => r.text()))
      expect(metrics).toMatch(/iop_chat_requests_total\{api="messages",model="model",stream="false",outcome="[a-z_]+"\} 1/)
    }))

  it.scopedLive("messages.stream: text events, the raw events in order, and finalMessage()", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({ kind: "sse", events: textStream(["Hel", "lo"], { usage: completionTokens(5, 2) }) })
      const stream = edge.client().messages.stream({ model: "model", max_tokens: 64, messages: hi })
      const texts: Array<string> = []
      const types: Array<string> = []
      let startInput: number | undefined
      stream.on("text", (t) => texts.push(t))
      stream.on("streamEvent", (e) => {
        types.push(e.type)
        if (e.type === "message_start") startInput = e.message.usage.input_tokens
      })
      const final = yield* Effect.promise(() => stream.finalMessage())
      expect(texts.join("")).toBe("Hello")
      expect(types[0]).toBe("message_start")
      // message_start carries the edge's estimate, what count_tokens answers for the same request (LangChain reads it).
      const counted = yield* Effect.promise(() => edge.client().messages.countTokens({ model: "model", messages: hi }))
      expect(startInput).toBe(counted.input_tokens)
      expect(startInput).toBeGreaterThan(0)
      expect(types.slice(-2)).toEqual(["message_delta", "message_stop"])
      expect(final).toMatchObject({
        content: [{ type: "text", text: "Hello" }],
        stop_reason: "end_turn",
        usage: { input_tokens: 5, output_tokens: 2 }
      })
    }))

  it.scopedLive("a native tool call → a tool_use block (create and stream), stop_reason tool_use; its result goes back as a tool message", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge((_, n) =>
        n < 2 ? { kind: "sse", events: nativeCall("{\"city\":\"Paris\"}") } : { kind: "sse", events: textStream(["Sunny"]) }
      )
      const client = edge.client()
      const created = yield* Effect.promise(() =>
        client.messages.create({ model: "model", max_tokens: 64, messages: hi, tools: [weather] })
      )
      expect(created.stop_reason).toBe("tool_use")
      expect(created.content).toEqual([{ type: "tool_use", id: "call_abc", name: "get_weather", input: { city: "Paris" } }])
      const streamed = yield* Effect.promise(() =>
        client.messages.stream({ model: "model", max_tokens: 64, messages: hi, tools: [weather] }).finalMessage()
      )
      expect(streamed.content).toEqual(created.content)
      expect(streamed.stop_reason).toBe("tool_use")

      const answer = yield* Effect.promise(() =>
        client.messages.create({
          model: "model",
          max_tokens: 64,
          tools: [weather],
          messages: [
            ...hi,
            { role: "assistant", content: created.content },
            { role: "user", content: [{ type: "tool_result", tool_use_id: "call_abc", content: "18°C, sunny" }] }
          ]
        })
      )
      expect(answer.content).toEqual([{ type: "text", text: "Sunny" }])
      expect(upstreamBody(edge.up, 2)["messages"]).toEqual([
        { role: "user", content: "hi" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_abc", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }]
        },
        { role: "tool", tool_call_id: "call_abc", content: "18°C, sunny" }
      ])
    }))

  it.scopedLive("<tool_call> markup in the upstream's text → a tool_use block, the markup never shown", () =>
    Effect.gen(function* () {
      const markup = "Checking.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>"
      const edge = yield* messagesEdge({ kind: "sse", events: textStream([markup.slice(0, 20), markup.slice(20)]) })
      const stream = edge.client().messages.stream({ model: "model", max_tokens: 64, messages: hi, tools: [weather] })
      const final = yield* Effect.promise(() => stream.finalMessage())
      expect(final.stop_reason).toBe("tool_use")
      expect(final.content).toHaveLength(2)
      expect(final.content[0]).toEqual({ type: "text", text: "Checking." })
      expect(final.content[1]).toMatchObject({ type: "tool_use", name: "get_weather", input: { city: "Oslo" } })
    }))

  it.scopedLive("thinking enabled: the upstream's reasoning_content is a thinking block; without thinking it is hidden", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({ kind: "sse", events: textStream(["42"], { reasoning: ["Let me ", "think."] }) })
      const client = edge.client()
      const thinking = { type: "enabled" as const, budget_tokens: 1024 }
      const shown = yield* Effect.promise(() =>
        client.messages.create({ model: "model", max_tokens: 2048, messages: hi, thinking })
      )
      expect(shown.content).toEqual([
        { type: "thinking", thinking: "Let me think.", signature: "" },
        { type: "text", text: "42" }
      ])
      const thoughts: Array<string> = []
      const stream = client.messages.stream({ model: "model", max_tokens: 2048, messages: hi, thinking })
      stream.on("thinking", (t) => thoughts.push(t))
      const streamed = yield* Effect.promise(() => stream.finalMessage())
      expect(thoughts.join("")).toBe("Let me think.")
      expect(streamed.content).toEqual(shown.content)

      const hidden = yield* Effect.promise(() => client.messages.create({ model: "model", max_tokens: 64, messages: hi }))
      expect(hidden.content).toEqual([{ type: "text", text: "42" }])
      const disabled = yield* Effect.promise(() =>
        client.messages.stream({ model: "model", max_tokens: 64, messages: hi, thinking: { type: "disabled" } }).finalMessage()
      )
      expect(disabled.content).toEqual([{ type: "text", text: "42" }])
    }))

  it.scopedLive("x-api-key: with keys configured the right key is served; none or a wrong one is a 401 authentication_error", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({ kind: "sse", events: textStream(["ok"]) }, { apiKeys: ["sk-edge-client-1"] })
      const served = yield* Effect.promise(() =>
        edge.client({ apiKey: "sk-edge-client-1" }).messages.create({ model: "model", max_tokens: 8, messages: hi })
      )
      expect(served.content).toEqual([{ type: "text", text: "ok" }])
      const wrong = apiError(
        yield* caught(() => edge.client({ apiKey: "sk-wrong" }).messages.create({ model: "model", max_tokens: 8, messages: hi }))
      )
      expect(wrong).toBeInstanceOf(Anthropic.AuthenticationError)
      expect(wrong.status).toBe(401)
      expect(wrong.type).toBe("authentication_error")
      expect(wrong.error).toEqual({ type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } })
      const none = yield* Effect.promise(() =>
        fetch(`${edge.url}/v1/messages`, {
          method: "POST",
          headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" },
          body: JSON.stringify({ model: "model", max_tokens: 8, messages: hi })
        })
      )
      expect(none.status).toBe(401)
      expect(yield* Effect.promise(() => none.json())).toEqual({
        type: "error",
        error: { type: "authentication_error", message: "x-api-key header is required" }
      })
      expect(edge.up.requests).toHaveLength(1)
    }))

  it.scopedLive("an upstream 400 is a BadRequestError (invalid_request_error, its message), not retried", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({
        kind: "json",
        status: 400,
        body: { error: { message: "maximum context length is 8192 tokens", type: "invalid_request_error", code: "context_length_exceeded" } }
      })
      for (const stream of [false, true]) {
        const error = apiError(
          yield* caught(async () => {
            const client = edge.client({ maxRetries: 2 })
            return stream
              ? client.messages.stream({ model: "model", max_tokens: 8, messages: hi }).finalMessage()
              : client.messages.create({ model: "model", max_tokens: 8, messages: hi })
          })
        )
        expect(error).toBeInstanceOf(Anthropic.BadRequestError)
        expect(error.type).toBe("invalid_request_error")
        expect(error.message).toContain("maximum context length is 8192 tokens")
        expect(error.headers?.get("x-should-retry")).toBe("false")
      }
      expect(edge.up.requests).toHaveLength(2)
    }))

  it.scopedLive("strict: an invalid first answer is replayed; the valid tool_use is answered after 2 upstream requests (create, buffered stream)", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge((_, n) =>
        ({ kind: "sse", events: nativeCall(n % 2 === 0 ? "{\"city\": 1}" : "{\"city\": \"Rome\"}", `call_${n}`) })
      )
      const client = edge.client()
      const created = yield* Effect.promise(() =>
        client.messages.create({ model: "strict", max_tokens: 64, messages: hi, tools: [weather] })
      )
      expect(created.content).toEqual([{ type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Rome" } }])
      expect(edge.up.requests).toHaveLength(2)
      expect(upstreamBody(edge.up, 1)["messages"]).toEqual(upstreamBody(edge.up, 0)["messages"])
      const streamed = yield* Effect.promise(() =>
        client.messages.stream({ model: "strict-buffered", max_tokens: 64, messages: hi, tools: [weather] }).finalMessage()
      )
      expect(streamed.content).toEqual([{ type: "tool_use", id: "call_3", name: "get_weather", input: { city: "Rome" } }])
      expect(edge.up.requests).toHaveLength(4)
      // A live strict stream has written its head: nothing is replayed, the stream ends with the validation error.
      const live = apiError(
        yield* caught(() =>
          client.messages.stream({ model: "strict", max_tokens: 64, messages: hi, tools: [weather] }).finalMessage()
        )
      )
      expect(live.type).toBe("api_error")
      expect(live.message).toContain("tool calls failed validation")
      expect(edge.up.requests).toHaveLength(5)
    }))

  it.scopedLive("a run that fails after output: the stream ends with an error event, which the SDK throws", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({ kind: "reset", before: [chunk({ role: "assistant", content: "Hal" })] })
      const response = yield* Effect.promise(() =>
        fetch(`${edge.url}/v1/messages`, {
          method: "POST",
          headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" },
          body: JSON.stringify({ model: "model", max_tokens: 8, messages: hi, stream: true })
        })
      )
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toContain("text/event-stream")
      const events = parseEvents(yield* Effect.promise(() => response.text()))
      expect(events.map((e) => e.event)).toEqual([
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "error"
      ])
      expect(events[5]?.data).toMatchObject({ type: "error", error: { type: "api_error" } })
      const error = apiError(
        yield* caught(() => edge.client().messages.stream({ model: "model", max_tokens: 8, messages: hi }).finalMessage())
      )
      expect(error.type).toBe("api_error")
    }))

  it.scopedLive("server tools and block types the edge does not forward are left out, logged at debug", () =>
    Effect.gen(function* () {
      const logs: Array<{ readonly message: string; readonly annotations: Readonly<Record<string, unknown>> }> = []
      const edge = yield* messagesEdge({ kind: "sse", events: textStream(["ok"]) }, { logs })
      const message = yield* Effect.promise(() =>
        edge.client().messages.create({
          model: "model",
          max_tokens: 8,
          messages: hi,
          tools: [{ type: "web_search_20250305", name: "web_search" }, weather]
        })
      )
      expect(message.content).toEqual([{ type: "text", text: "ok" }])
      expect(upstreamBody(edge.up)["tools"]).toEqual([
        { type: "function", function: { name: "get_weather", description: weather.description, parameters: weather.input_schema } }
      ])
      const noted = logs.find((l) => l.message === "request parts not forwarded")
      expect(noted?.annotations["not_forwarded_parts"]).toBe("tools[0] (web_search_20250305)")
    }))

  it.scopedLive("?beta=true (Claude Code, client.beta.messages) is the same route", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({ kind: "sse", events: textStream(["beta"]) })
      const message = yield* Effect.promise(() =>
        edge.client().beta.messages.create({ model: "model", max_tokens: 8, messages: hi, betas: ["interleaved-thinking-2025-05-14"] })
      )
      expect(message.content).toEqual([{ type: "text", text: "beta" }])
      expect(edge.up.requests).toHaveLength(1)
    }))

  it.scopedLive("requests the edge refuses: missing max_tokens 400, unknown model 404, unknown route 404, all in Anthropic's shape", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({ kind: "sse", events: textStream(["x"]) })
      const post = (path: string, body: unknown) =>
        Effect.promise(async () => {
          const r = await fetch(`${edge.url}${path}`, {
            method: "POST",
            headers: { "content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": "k" },
            body: JSON.stringify(body)
          })
          return { status: r.status, body: await r.json() }
        })
      expect(yield* post("/v1/messages", { model: "model", messages: hi })).toEqual({
        status: 400,
        body: { type: "error", error: { type: "invalid_request_error", message: "max_tokens: missing (required)" } }
      })
      const unknown = apiError(
        yield* caught(() => edge.client().messages.create({ model: "claude-opus-9", max_tokens: 8, messages: hi }))
      )
      expect(unknown).toBeInstanceOf(Anthropic.NotFoundError)
      expect(unknown.type).toBe("not_found_error")
      expect(yield* post("/v1/messages/batches", {})).toMatchObject({ status: 404, body: { type: "error", error: { type: "not_found_error" } } })
      expect(edge.up.requests).toHaveLength(0)
    }))

  it.scopedLive("count_tokens: an estimate of the input, same key guard, unknown model 404", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({ kind: "sse", events: [] }, { apiKeys: ["sk-1"] })
      const client = edge.client({ apiKey: "sk-1" })
      const counted = yield* Effect.promise(() =>
        client.messages.countTokens({ model: "claude-sonnet-4-5", system: "abcd", messages: [{ role: "user", content: "efgh" }] })
      )
      expect(counted).toEqual({ input_tokens: 2 })
      const denied = apiError(
        yield* caught(() => edge.client({ apiKey: "nope" }).messages.countTokens({ model: "model", messages: hi }))
      )
      expect(denied.status).toBe(401)
      const unknown = apiError(yield* caught(() => client.messages.countTokens({ model: "nope", messages: hi })))
      expect(unknown.status).toBe(404)
      expect(edge.up.requests).toHaveLength(0)
    }))

  it.scopedLive("GET /v1/models: Anthropic's list shape with anthropic-version (ids and aliases), OpenAI's without", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({ kind: "sse", events: [] })
      const page = yield* Effect.promise(() => edge.client().models.list())
      expect(page.data.map((m) => m.id)).toEqual(["model", "claude-sonnet-4-5", "strict", "strict-buffered"])
      // models.retrieve: one model (here an alias) in Anthropic's shape; an unknown one is the SDK's NotFoundError.
      const one = yield* Effect.promise(() => edge.client().models.retrieve("claude-sonnet-4-5"))
      expect(one).toMatchObject({ type: "model", id: "claude-sonnet-4-5", display_name: "claude-sonnet-4-5" })
      const missing = yield* Effect.promise(() => edge.client().models.retrieve("nope").then(() => "found", (e: unknown) => e))
      expect(missing).toBeInstanceOf(Anthropic.NotFoundError)
      const raw = yield* Effect.promise(() =>
        fetch(`${edge.url}/v1/models`, { headers: { "anthropic-version": "2023-06-01" } }).then((r) => r.json())
      )
      expect(raw).toEqual({
        data: [
          { type: "model", id: "model", display_name: "model", created_at: "1970-01-01T00:00:00Z" },
          { type: "model", id: "claude-sonnet-4-5", display_name: "claude-sonnet-4-5", created_at: "1970-01-01T00:00:00Z" },
          { type: "model", id: "strict", display_name: "strict", created_at: "1970-01-01T00:00:00Z" },
          { type: "model", id: "strict-buffered", display_name: "strict-buffered", created_at: "1970-01-01T00:00:00Z" }
        ],
        has_more: false,
        first_id: "model",
        last_id: "strict-buffered"
      })
      const openai = yield* Effect.promise(() => fetch(`${edge.url}/v1/models`).then((r) => r.json()))
      expect(openai).toMatchObject({
        object: "list",
        data: ["model", "claude-sonnet-4-5", "strict", "strict-buffered"].map((id) => ({ id, object: "model" }))
      })
    }))

  it.scopedLive("HEAD / and GET / answer 200 without a key (Claude Code probes its base URL)", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({ kind: "sse", events: [] }, { apiKeys: ["sk-1"] })
      for (const method of ["HEAD", "GET"]) {
        const r = yield* Effect.promise(() => fetch(`${edge.url}/`, { method, headers: { "user-agent": "Bun/1.4.0" } }))
        expect(r.status).toBe(200)
      }
    }))
})
