import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectDoneOnce, postJson, readSse } from "../support/e2e.js"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { chunk, completionTokens, FAKE_MODEL, textStream, usageChunk } from "../support/fakeUpstream.js"
import { type ScenarioUpstream, startScenarioUpstream } from "../support/scenarios.js"

/** The `openai` provider against a fake OpenAI-compatible upstream: text, reasoning, usage, native tool calls, request fields. */

const WEATHER_TOOL = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Current weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, unit: { type: "string", enum: ["c", "f"] } },
      required: ["city"]
    }
  }
}
const TIME_TOOL = {
  type: "function" as const,
  function: {
    name: "get_time",
    parameters: { type: "object", properties: { zone: { type: "string" } }, required: ["zone"] }
  }
}

/** Two tool calls, each split over several upstream deltas; the second comes without an id. */
const splitToolCallStream = (): Array<object> => [
  chunk({ role: "assistant", content: null }),
  chunk({ tool_calls: [{ index: 0, id: "call_up_1", type: "function", function: { name: "get_weather", arguments: "" } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: "{\"ci" } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: "ty\": \"Par" } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: "is\"}" } }] }),
  chunk({ tool_calls: [{ index: 1, type: "function", function: { name: "get_time", arguments: "{\"zone\":" } }] }),
  chunk({ tool_calls: [{ index: 1, function: { arguments: " \"Europe/Paris\"}" } }] }),
  chunk({ finish_reason: "tool_calls" }),
  usageChunk(completionTokens(40, 20))
]

describe("openai provider through a fake upstream", () => {
  let upstream: ScenarioUpstream
  let edge: EdgeProcess
  let client: OpenAI

  beforeAll(async () => {
    upstream = await startScenarioUpstream()
    edge = await startEdge({
      config: {
        models: [
          {
            id: "up",
            provider: { type: "openai", baseUrl: upstream.url, model: FAKE_MODEL, apiKey: "up-secret" },
            tools: "native"
          }
        ]
      }
    })
    client = new OpenAI({ baseURL: edge.baseURL, apiKey: "x", maxRetries: 0 })
  })
  afterAll(async () => {
    await edge?.stop()
    await upstream?.close()
  })

  it("streams upstream text: role first, the content in order, stop finish chunk, [DONE] once", async () => {
    const key = upstream.script("stream text", { kind: "sse", events: textStream(["Hel", "lo, ", "wor", "ld!"]) })
    const response = await postJson(`${edge.baseURL}/chat/completions`, {
      model: "up",
      stream: true,
      messages: [{ role: "user", content: key }]
    })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/)
    const sse = await readSse(response)
    expectDoneOnce(sse)
    expect(sse.events[0].choices[0].delta.role).toBe("assistant")
    expect(sse.events.map((e) => e.choices[0]?.delta.content ?? "").join("")).toBe("Hello, world!")
    const last = sse.events[sse.events.length - 1]
    expect(last.choices[0].finish_reason).toBe("stop")
    expect(last.choices[0].delta).toEqual({})
    expect(sse.events.filter((e) => e.choices[0]?.finish_reason != null)).toHaveLength(1)
    expect(last.model).toBe("up")

    // And through the SDK.
    const stream = await client.chat.completions.create({ model: "up", stream: true, messages: [{ role: "user", content: key }] })
    let text = ""
    for await (const c of stream) text += c.choices[0]?.delta.content ?? ""
    expect(text).toBe("Hello, world!")
  })

  it("non-stream text: one chat.completion with the whole content and finish stop", async () => {
    const key = upstream.script("json text", { kind: "sse", events: textStream(["The ", "answer ", "is ", "42."]) })
    const completion = await client.chat.completions.create({ model: "up", messages: [{ role: "user", content: key }] })
    expect(completion.object).toBe("chat.completion")
    expect(completion.model).toBe("up")
    expect(completion.choices[0]!.message.role).toBe("assistant")
    expect(completion.choices[0]!.message.content).toBe("The answer is 42.")
    expect(completion.choices[0]!.finish_reason).toBe("stop")
  })

  it("upstream finish_reason length is passed on", async () => {
    const key = upstream.script("length", { kind: "sse", events: textStream(["cut ", "sho"], { finish_reason: "length" }) })
    const completion = await client.chat.completions.create({ model: "up", messages: [{ role: "user", content: key }] })
    expect(completion.choices[0]!.finish_reason).toBe("length")
    expect(completion.choices[0]!.message.content).toBe("cut sho")
  })

  it("upstream reasoning_content arrives as delta.reasoning_content, never inside content", async () => {
    const key = upstream.script("reasoning", {
      kind: "sse",
      events: textStream(["The answer ", "is 4."], { reasoning: ["Two plus two ", "makes four."] })
    })
    const sse = await readSse(
      await postJson(`${edge.baseURL}/chat/completions`, { model: "up", stream: true, messages: [{ role: "user", content: key }] })
    )
    expectDoneOnce(sse)
    const reasoning = sse.events.map((e) => e.choices[0]?.delta.reasoning_content ?? "").join("")
    const content = sse.events.map((e) => e.choices[0]?.delta.content ?? "").join("")
    expect(reasoning).toBe("Two plus two makes four.")
    expect(content).toBe("The answer is 4.")
    for (const e of sse.events) {
      const c: string = e.choices[0]?.delta.content ?? ""
      expect(c).not.toMatch(/plus|makes/)
    }

    const completion = await client.chat.completions.create({ model: "up", messages: [{ role: "user", content: key }] })
    const message = completion.choices[0]!.message as OpenAI.Chat.Completions.ChatCompletionMessage & {
      reasoning_content?: string
    }
    expect(message.content).toBe("The answer is 4.")
    expect(message.reasoning_content).toBe("Two plus two makes four.")
  })

  it("upstream `reasoning` field and a leading <think> block also become reasoning_content", async () => {
    const viaField = upstream.script("reasoning field", {
      kind: "sse",
      events: [chunk({ role: "assistant" }), chunk({ reasoning: "Thinking hard." }), chunk({ content: "Done." }), chunk({ finish_reason: "stop" })]
    })
    const viaThink = upstream.script("think block", {
      kind: "sse",
      events: textStream(["<thi", "nk>Secret pl", "an.</th", "ink>", "Visible."])
    })
    for (const key of [viaField, viaThink]) {
      const sse = await readSse(
        await postJson(`${edge.baseURL}/chat/completions`, { model: "up", stream: true, messages: [{ role: "user", content: key }] })
      )
      expectDoneOnce(sse)
      const reasoning = sse.events.map((e) => e.choices[0]?.delta.reasoning_content ?? "").join("")
      const content = sse.events.map((e) => e.choices[0]?.delta.content ?? "").join("")
      expect(reasoning).toBe(key === viaField ? "Thinking hard." : "Secret plan.")
      expect(content).toBe(key === viaField ? "Done." : "Visible.")
    }
  })

  it("usage with cached and reasoning tokens is reported (stream include_usage and non-stream)", async () => {
    const usage = completionTokens(120, 30, { cached: 100, reasoning: 12 })
    const key = upstream.script("usage", {
      kind: "sse",
      events: textStream(["ok"], { reasoning: ["hmm"], usage })
    })
    const sse = await readSse(
      await postJson(`${edge.baseURL}/chat/completions`, {
        model: "up",
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: key }]
      })
    )
    expectDoneOnce(sse)
    const n = sse.events.length
    expect(sse.events[n - 2].choices[0].finish_reason).toBe("stop")
    const last = sse.events[n - 1]
    expect(last.choices).toEqual([])
    expect(last.usage).toMatchObject({
      prompt_tokens: 120,
      completion_tokens: 30,
      total_tokens: 150,
      prompt_tokens_details: { cached_tokens: 100 },
      completion_tokens_details: { reasoning_tokens: 12 }
    })

    const completion = await client.chat.completions.create({ model: "up", messages: [{ role: "user", content: key }] })
    expect(completion.usage).toMatchObject({
      prompt_tokens: 120,
      completion_tokens: 30,
      total_tokens: 150,
      prompt_tokens_details: { cached_tokens: 100 },
      completion_tokens_details: { reasoning_tokens: 12 }
    })
  })

  it("native tool calls split across upstream deltas arrive as ONE delta.tool_calls chunk, then finish tool_calls", async () => {
    const key = upstream.script("tool stream", { kind: "sse", events: splitToolCallStream() })
    const sse = await readSse(
      await postJson(`${edge.baseURL}/chat/completions`, {
        model: "up",
        stream: true,
        tools: [WEATHER_TOOL, TIME_TOOL],
        messages: [{ role: "user", content: key }]
      })
    )
    expectDoneOnce(sse)
    expect(sse.events[0].choices[0].delta.role).toBe("assistant")
    const withCalls = sse.events.filter((e) => e.choices[0]?.delta.tool_calls !== undefined)
    expect(withCalls).toHaveLength(1)
    const calls = withCalls[0].choices[0].delta.tool_calls
    expect(calls).toHaveLength(2)
    expect(calls[0]).toMatchObject({ index: 0, id: "call_up_1", type: "function", function: { name: "get_weather" } })
    expect(typeof calls[0].function.arguments).toBe("string")
    expect(JSON.parse(calls[0].function.arguments)).toEqual({ city: "Paris" })
    expect(calls[1]).toMatchObject({ index: 1, type: "function", function: { name: "get_time" } })
    expect(calls[1].id).toMatch(/^call_\w+/)
    expect(calls[1].id).not.toBe(calls[0].id)
    expect(JSON.parse(calls[1].function.arguments)).toEqual({ zone: "Europe/Paris" })

    const last = sse.events[sse.events.length - 1]
    expect(last.choices[0].finish_reason).toBe("tool_calls")
    expect(last.choices[0].delta).toEqual({})
    expect(sse.events.indexOf(withCalls[0])).toBeLessThan(sse.events.length - 1)
    expect(sse.events.filter((e) => e.choices[0]?.finish_reason != null)).toHaveLength(1)
    // No tool-call JSON leaks into content.
    expect(sse.events.map((e) => e.choices[0]?.delta.content ?? "").join("")).toBe("")
  })

  it("native tool calls, SDK stream: the accumulated calls are complete and valid JSON", async () => {
    const key = upstream.script("tool sdk stream", { kind: "sse", events: splitToolCallStream() })
    const stream = await client.chat.completions.create({
      model: "up",
      stream: true,
      tools: [WEATHER_TOOL, TIME_TOOL],
      messages: [{ role: "user", content: key }]
    })
    const chunks: Array<OpenAI.Chat.Completions.ChatCompletionChunk> = []
    for await (const c of stream) chunks.push(c)
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? [])
    expect(deltas.map((d) => d.function?.name)).toEqual(["get_weather", "get_time"])
    expect(chunks[chunks.length - 1]!.choices[0]!.finish_reason).toBe("tool_calls")
  })

  it("non-stream native tool calls: message.tool_calls with ids, function names, JSON-string arguments; finish tool_calls", async () => {
    const key = upstream.script("tool json", { kind: "sse", events: splitToolCallStream() })
    const completion = await client.chat.completions.create({
      model: "up",
      tools: [WEATHER_TOOL, TIME_TOOL],
      messages: [{ role: "user", content: key }]
    })
    const choice = completion.choices[0]!
    expect(choice.finish_reason).toBe("tool_calls")
    const calls = choice.message.tool_calls ?? []
    expect(calls).toHaveLength(2)
    const [weather, time] = calls as Array<OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall>
    expect(weather).toMatchObject({ id: "call_up_1", type: "function", function: { name: "get_weather" } })
    expect(JSON.parse(weather!.function.arguments)).toEqual({ city: "Paris" })
    expect(time!.id).toMatch(/^call_\w+/)
    expect(time!.type).toBe("function")
    expect(time!.function.name).toBe("get_time")
    expect(JSON.parse(time!.function.arguments)).toEqual({ zone: "Europe/Paris" })
    expect(choice.message.content ?? "").toBe("")
  })

  it("a native tool call streamed without arguments still gets arguments as a JSON string", async () => {
    const key = upstream.script("tool no args", {
      kind: "sse",
      events: [
        chunk({ role: "assistant" }),
        chunk({ tool_calls: [{ index: 0, id: "call_noargs", type: "function", function: { name: "get_time" } }] }),
        chunk({ finish_reason: "tool_calls" })
      ]
    })
    const completion = await client.chat.completions.create({
      model: "up",
      tools: [TIME_TOOL],
      messages: [{ role: "user", content: key }]
    })
    const call = completion.choices[0]!.message.tool_calls?.[0] as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall
    expect(call.id).toBe("call_noargs")
    expect(call.function.name).toBe("get_time")
    expect(typeof call.function.arguments).toBe("string")
    expect(() => JSON.parse(call.function.arguments)).not.toThrow()
    expect(completion.choices[0]!.finish_reason).toBe("tool_calls")
  })

  it("request fields are passed upstream; metadata is not; a non-stream request asks for a whole answer (stream: false)", async () => {
    // The named tool_choice is held by the edge: the upstream answers with that call.
    const call = { index: 0, id: "call_1", type: "function" as const, function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }
    const key = upstream.script("fields", {
      kind: "sse",
      events: [chunk({ tool_calls: [call] }), chunk({ finish_reason: "tool_calls" })]
    })
    await client.chat.completions.create({
      model: "up",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: key }
      ],
      tools: [WEATHER_TOOL],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false,
      temperature: 0.3,
      top_p: 0.9,
      max_tokens: 77,
      stop: ["END", "STOP"],
      seed: 1234,
      response_format: { type: "json_object" },
      metadata: { tenant: "acme", trace: "t-1" }
    })
    const sent = upstream.requestsFor(key)
    expect(sent).toHaveLength(1)
    const { body, headers } = sent[0]!
    const b = body as Record<string, any>
    expect(b["model"]).toBe(FAKE_MODEL)
    expect(b["stream"]).toBe(false)
    expect(b).not.toHaveProperty("stream_options")
    expect(b["messages"]).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: key }
    ])
    expect(b["tools"]).toEqual([WEATHER_TOOL])
    expect(b["tool_choice"]).toEqual({ type: "function", function: { name: "get_weather" } })
    expect(b["parallel_tool_calls"]).toBe(false)
    expect(b["temperature"]).toBe(0.3)
    expect(b["top_p"]).toBe(0.9)
    expect(b["max_tokens"]).toBe(77)
    expect(b["stop"]).toEqual(["END", "STOP"])
    expect(b["seed"]).toBe(1234)
    expect(b["response_format"]).toEqual({ type: "json_object" })
    expect(b).not.toHaveProperty("metadata")
    expect(JSON.stringify(b)).not.toContain("acme")
    // The provider's key goes upstream, never the caller's.
    expect(headers["authorization"]).toBe("Bearer up-secret")
  })

  it("a stream request without stream_options still asks the upstream for usage; nothing unset is invented", async () => {
    const key = upstream.script("fields minimal", { kind: "sse", events: textStream(["ok"]) })
    const sse = await readSse(
      await postJson(`${edge.baseURL}/chat/completions`, { model: "up", stream: true, messages: [{ role: "user", content: key }] })
    )
    expectDoneOnce(sse)
    // The caller did not ask for usage: no usage chunk.
    expect(sse.events.every((e) => e.choices.length === 1)).toBe(true)
    const b = upstream.requestsFor(key)[0]!.body as Record<string, unknown>
    expect(b["stream"]).toBe(true)
    expect(b["stream_options"]).toEqual({ include_usage: true })
    for (const field of ["tools", "tool_choice", "temperature", "top_p", "max_tokens", "stop", "seed", "response_format", "metadata"]) {
      expect(b, field).not.toHaveProperty(field)
    }
  })

  it("max_completion_tokens reaches the upstream as the token limit", async () => {
    const key = upstream.script("max completion tokens", { kind: "sse", events: textStream(["ok"]) })
    await client.chat.completions.create({ model: "up", max_completion_tokens: 55, messages: [{ role: "user", content: key }] })
    const b = upstream.requestsFor(key)[0]!.body as Record<string, unknown>
    expect(b["max_tokens"] ?? b["max_completion_tokens"]).toBe(55)
  })

  it("content-part array messages are passed upstream", async () => {
    const key = upstream.script("parts", { kind: "sse", events: textStream(["ok"]) })
    await client.chat.completions.create({
      model: "up",
      messages: [{ role: "user", content: [{ type: "text", text: key }] }]
    })
    const b = upstream.requestsFor(key)[0]!.body as { messages: Array<{ content: unknown }> }
    const content = b.messages[b.messages.length - 1]!.content
    expect(JSON.stringify(content)).toContain(key)
  })
})
