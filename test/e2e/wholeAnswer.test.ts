import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually, jsonOf, postJson } from "../support/e2e.js"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { FAKE_MODEL } from "../support/fakeUpstream.js"
import { type ScenarioUpstream, startScenarioUpstream } from "../support/scenarios.js"

/**
 * Non-stream requests of every API ask the upstream for a whole answer (`stream: false`, JSON) and map it to the
 * same run events a stream gives: content, reasoning, native tool calls, usage, logprobs; an error status; text-mode
 * tool parsing over the whole text; a whole answer slower than `runs.idleTimeoutMs` (the idle bound does not apply
 * while it computes); a caller that leaves aborts the upstream request.
 */

const IDLE_TIMEOUT_MS = 300

const WEATHER_TOOL = {
  type: "function" as const,
  function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }
}

const answer = (message: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  kind: "json" as const,
  status: 200,
  body: {
    id: "chatcmpl-up",
    object: "chat.completion",
    model: FAKE_MODEL,
    choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: "stop", ...extra }],
    usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18, prompt_tokens_details: { cached_tokens: 3 } }
  }
})

const toolAnswer = answer({
  content: null,
  tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }]
}, { finish_reason: "tool_calls" })

describe("non-stream requests ask the upstream for a whole answer", () => {
  let upstream: ScenarioUpstream
  let edge: EdgeProcess
  const url = (path: string) => `${edge.url}/v1/${path}`
  const user = (key: string) => [{ role: "user", content: key }]

  beforeAll(async () => {
    upstream = await startScenarioUpstream()
    const provider = { type: "openai", baseUrl: upstream.url, model: FAKE_MODEL }
    edge = await startEdge({
      config: {
        runs: { idleTimeoutMs: IDLE_TIMEOUT_MS },
        models: [{ id: "up", provider, tools: "native" }, { id: "up-text", provider, tools: "text" }]
      }
    })
  })
  afterAll(async () => {
    await edge?.stop()
    await upstream?.close()
  })

  it("chat completions: content, reasoning, usage and logprobs; the upstream was asked for JSON", async () => {
    const logprobs = { content: [{ token: "Hi", logprob: -0.25, bytes: [72, 105], top_logprobs: [] }] }
    const key = upstream.script("cc whole", answer({ content: "Hi", reasoning_content: "think" }, { logprobs }))
    const response = await postJson(url("chat/completions"), { model: "up", messages: user(key), logprobs: true })
    expect(response.status).toBe(200)
    const body = await jsonOf(response)
    expect(body.choices[0].message).toMatchObject({ role: "assistant", content: "Hi", reasoning_content: "think" })
    expect(body.choices[0].finish_reason).toBe("stop")
    expect(body.choices[0].logprobs.content).toEqual([{ token: "Hi", logprob: -0.25, bytes: [72, 105], top_logprobs: [] }])
    expect(body.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 3 } })
    const sent = upstream.requestsFor(key)
    expect(sent).toHaveLength(1)
    expect(sent[0]!.body).toMatchObject({ stream: false, logprobs: true })
    expect(sent[0]!.body).not.toHaveProperty("stream_options")
    expect(sent[0]!.headers["accept"]).toBe("application/json")
  })

  it("chat completions: native tool calls", async () => {
    const key = upstream.script("cc tools", toolAnswer)
    const body = await jsonOf(await postJson(url("chat/completions"), { model: "up", messages: user(key), tools: [WEATHER_TOOL] }))
    expect(body.choices[0].finish_reason).toBe("tool_calls")
    expect(body.choices[0].message.tool_calls).toEqual([
      { id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }
    ])
  })

  it("text mode: the tool call markup in the whole text is parsed into a call", async () => {
    const key = upstream.script("cc text tools", answer({
      content: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"
    }))
    const body = await jsonOf(await postJson(url("chat/completions"), { model: "up-text", messages: user(key), tools: [WEATHER_TOOL] }))
    expect(body.choices[0].finish_reason).toBe("tool_calls")
    const call = body.choices[0].message.tool_calls[0]
    expect(call.function.name).toBe("get_weather")
    expect(JSON.parse(call.function.arguments)).toEqual({ city: "Oslo" })
    expect(body.choices[0].message.content ?? "").not.toContain("tool_call")
  })

  it("responses: output text, a function call and usage", async () => {
    const text = upstream.script("resp text", answer({ content: "Hello" }))
    const r1 = await jsonOf(await postJson(url("responses"), { model: "up", input: text }))
    expect(r1.status).toBe("completed")
    expect(r1.output.find((o: any) => o.type === "message").content[0].text).toBe("Hello")
    expect(r1.usage).toMatchObject({ input_tokens: 11, output_tokens: 7 })
    expect(upstream.requestsFor(text)[0]!.body).toMatchObject({ stream: false })
    const tools = upstream.script("resp tools", toolAnswer)
    const r2 = await jsonOf(await postJson(url("responses"), {
      model: "up",
      input: tools,
      tools: [{ type: "function", name: "get_weather", parameters: WEATHER_TOOL.function.parameters }]
    }))
    expect(r2.output.find((o: any) => o.type === "function_call")).toMatchObject({
      name: "get_weather",
      arguments: "{\"city\":\"Paris\"}"
    })
  })

  it("messages: text, tool_use and usage", async () => {
    const text = upstream.script("msg text", answer({ content: "Bonjour", reasoning_content: "hm" }))
    const m1 = await jsonOf(await postJson(url("messages"), { model: "up", max_tokens: 64, messages: user(text) }))
    expect(m1.content.find((c: any) => c.type === "text").text).toBe("Bonjour")
    expect(m1.stop_reason).toBe("end_turn")
    expect(m1.usage).toMatchObject({ output_tokens: 7 })
    expect(upstream.requestsFor(text)[0]!.body).toMatchObject({ stream: false })
    const tools = upstream.script("msg tools", toolAnswer)
    const m2 = await jsonOf(await postJson(url("messages"), {
      model: "up",
      max_tokens: 64,
      messages: user(tools),
      tools: [{ name: "get_weather", input_schema: WEATHER_TOOL.function.parameters }]
    }))
    expect(m2.stop_reason).toBe("tool_use")
    expect(m2.content.find((c: any) => c.type === "tool_use")).toMatchObject({ name: "get_weather", input: { city: "Paris" } })
  })

  it("an upstream error status is answered as a streamed run's would be", async () => {
    const key = upstream.script("whole 500", { kind: "json", status: 500, body: { error: { message: "boom" } } })
    const response = await postJson(url("chat/completions"), { model: "up", messages: user(key) })
    expect(response.status).toBe(502)
    expect((await jsonOf(response)).error.type).toBe("run_error")
    const bad = upstream.script("whole 400", { kind: "json", status: 400, body: { error: { message: "too long", code: "context_length_exceeded" } } })
    const rejected = await postJson(url("messages"), { model: "up", max_tokens: 8, messages: user(bad) })
    expect(rejected.status).toBe(400)
    expect(JSON.stringify(await jsonOf(rejected))).toContain("too long")
  })

  it("a whole answer that takes longer than runs.idleTimeoutMs is not cut: the idle bound does not see it computing", async () => {
    const key = upstream.script("slow whole", { ...answer({ content: "late" }), delayMs: IDLE_TIMEOUT_MS * 3 })
    const response = await postJson(url("chat/completions"), { model: "up", messages: user(key) })
    expect(response.status).toBe(200)
    expect((await jsonOf(response)).choices[0].message.content).toBe("late")
  })

  it("a caller that leaves while the whole answer computes aborts the upstream request", async () => {
    const key = upstream.script("left", { ...answer({ content: "never read" }), delayMs: 5_000 })
    const abortedBefore = upstream.aborted.length
    const controller = new AbortController()
    const pending = postJson(url("chat/completions"), { model: "up", messages: user(key) }, {}, controller.signal).catch(() => "aborted")
    await eventually(() => expect(upstream.requestsFor(key)).toHaveLength(1))
    controller.abort()
    expect(await pending).toBe("aborted")
    await eventually(() => expect(upstream.aborted.length).toBeGreaterThan(abortedBefore))
  })
})
