import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { fetchMetrics, metricSum, postJson } from "../support/e2e.js"
import { type InProcessEdge, startInProcessEdge } from "../support/edgeProcess.js"
import { chunk, FAKE_MODEL, type FakeUpstream, type RecordedRequest, type Script, startFakeUpstream } from "../support/fakeUpstream.js"
import { lastUserText } from "../support/scenarios.js"

/**
 * `tool_choice` and `parallel_tool_calls` held at the edge, black-box over HTTP, on all three APIs, against a fake
 * upstream that cannot constrain (it answers what its script says, whatever the request asked): `none` keeps
 * markup as text; `required` replays a reply without a call within `runs.toolValidationAttempts`, then answers the
 * typed error; a named choice takes only that function; Responses' `allowed_tools` only the allowed ones;
 * `parallel_tool_calls: false` (Messages: `disable_parallel_tool_use`) at most one call. A live stream cannot take
 * back what it wrote: it refuses with the error event; with `output.streamBuffer` it is replayed as a non-stream
 * request is.
 */

const ATTEMPTS = 3

// ---------------------------------------------------------------------------------------------- the fake upstream

interface Call {
  readonly name: string
  readonly args: Record<string, unknown>
}
/** One upstream answer: text, native calls, or both. */
interface Reply {
  readonly text?: string
  readonly calls?: ReadonlyArray<Call>
}

/** The answer in the shape the edge asked for: SSE chunks for a stream, one JSON completion otherwise. */
const answer = (reply: Reply, stream: boolean): Script => {
  const calls = (reply.calls ?? []).map((c, index) => ({
    index,
    id: `call_${index}`,
    type: "function" as const,
    function: { name: c.name, arguments: JSON.stringify(c.args) }
  }))
  const finish = calls.length > 0 ? "tool_calls" : "stop"
  if (stream) {
    return {
      kind: "sse",
      events: [
        chunk({ role: "assistant", content: "" }),
        ...(reply.text !== undefined ? [chunk({ content: reply.text })] : []),
        ...calls.map((c) => chunk({ tool_calls: [c] })),
        chunk({ finish_reason: finish })
      ]
    }
  }
  const message = {
    role: "assistant",
    content: reply.text ?? null,
    ...(calls.length > 0 ? { tool_calls: calls.map(({ index: _, ...c }) => c) } : {})
  }
  return {
    kind: "json",
    status: 200,
    body: {
      id: "chatcmpl-fake",
      object: "chat.completion",
      created: 1_700_000_000,
      model: FAKE_MODEL,
      choices: [{ index: 0, message, finish_reason: finish }],
      usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 }
    }
  }
}

/** Per scenario key (the request's last user message), the n-th upstream request gets the n-th reply (the last one after). */
const scenarios = new Map<string, ReadonlyArray<Reply>>()
const handle = (request: RecordedRequest): Script => {
  const key = lastUserText(request.body) ?? ""
  const replies = scenarios.get(key)
  const n = upstream.requests.filter((r) => lastUserText(r.body) === key).length - 1
  const reply = replies?.[Math.min(n, replies.length - 1)]
  if (reply === undefined) return { kind: "json", status: 500, body: { error: { message: `no script for ${key}`, type: "test" } } }
  const stream = (request.body as { stream?: unknown } | undefined)?.stream === true
  return answer(reply, stream)
}
let counter = 0
/** Registers the upstream's replies under a fresh key, which the test sends as its user message. */
const scenario = (name: string, ...replies: ReadonlyArray<Reply>): string => {
  const key = `${name} #${++counter}`
  scenarios.set(key, replies)
  return key
}
const upstreamBodies = (key: string): ReadonlyArray<Record<string, unknown>> =>
  upstream.requests.filter((r) => lastUserText(r.body) === key).map((r) => r.body as Record<string, unknown>)

const HERMES = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>"
const weatherIn = (city: string): Call => ({ name: "get_weather", args: { city } })
const timeIn = (zone: string): Call => ({ name: "get_time", args: { zone } })

// ---------------------------------------------------------------------------------------------- the three APIs

type Choice = "auto" | "none" | "required" | { readonly name: string }

interface Ask {
  readonly model: string
  readonly key: string
  readonly stream: boolean
  readonly choice?: Choice
  /** `false`: at most one call (Messages: `disable_parallel_tool_use`). */
  readonly parallel?: false
  /** Responses `allowed_tools` (mode auto): the functions a call may name. */
  readonly allowed?: ReadonlyArray<string>
}

/** What a client got: the text, the calls, and the error when the answer was one (its HTTP status, or 200 in a stream). */
interface Answer {
  readonly status: number
  readonly text: string
  readonly calls: ReadonlyArray<Call>
  /** The error's text (type, code and message) when the answer is an error. */
  readonly error: string | undefined
}

interface ApiClient {
  readonly name: string
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: (ask: Ask) => object
  /** The answer from a non-stream body. */
  readonly whole: (body: any) => Omit<Answer, "status" | "error">
  /** The answer from a stream's JSON events, in order. */
  readonly streamed: (events: ReadonlyArray<any>) => Omit<Answer, "status">
}

const PARAMETERS = {
  get_weather: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  get_time: { type: "object", properties: { zone: { type: "string" } }, required: ["zone"] }
}
const TOOLS = Object.entries(PARAMETERS)

const args = (text: string): Record<string, unknown> => JSON.parse(text === "" ? "{}" : text)

const chatCompletions: ApiClient = {
  name: "Chat Completions",
  path: "/v1/chat/completions",
  headers: {},
  body: (ask) => ({
    model: ask.model,
    stream: ask.stream,
    messages: [{ role: "user", content: ask.key }],
    tools: TOOLS.map(([name, parameters]) => ({ type: "function", function: { name, parameters } })),
    ...(ask.choice === undefined
      ? {}
      : { tool_choice: typeof ask.choice === "string" ? ask.choice : { type: "function", function: { name: ask.choice.name } } }),
    ...(ask.parallel === false ? { parallel_tool_calls: false } : {})
  }),
  whole: (body) => ({
    text: body.choices[0].message.content ?? "",
    calls: (body.choices[0].message.tool_calls ?? []).map((c: any) => ({ name: c.function.name, args: args(c.function.arguments) }))
  }),
  streamed: (events) => {
    let text = ""
    const calls = new Map<number, { name: string; args: string }>()
    let error: string | undefined
    for (const e of events) {
      if (e.error !== undefined) error = `${e.error.type}: ${e.error.message}`
      const delta = e.choices?.[0]?.delta
      if (typeof delta?.content === "string") text += delta.content
      for (const c of delta?.tool_calls ?? []) {
        const sofar = calls.get(c.index) ?? { name: "", args: "" }
        calls.set(c.index, { name: sofar.name + (c.function?.name ?? ""), args: sofar.args + (c.function?.arguments ?? "") })
      }
    }
    return { text, calls: [...calls.values()].map((c) => ({ name: c.name, args: args(c.args) })), error }
  }
}

const responsesOutput = (output: ReadonlyArray<any>): Omit<Answer, "status" | "error"> => ({
  text: output.filter((o) => o.type === "message").flatMap((o) => o.content.map((p: any) => p.text ?? "")).join(""),
  calls: output.filter((o) => o.type === "function_call").map((o) => ({ name: o.name, args: args(o.arguments) }))
})

const responses: ApiClient = {
  name: "Responses",
  path: "/v1/responses",
  headers: {},
  body: (ask) => ({
    model: ask.model,
    stream: ask.stream,
    input: ask.key,
    tools: TOOLS.map(([name, parameters]) => ({ type: "function", name, parameters })),
    ...(ask.allowed !== undefined
      ? { tool_choice: { type: "allowed_tools", mode: "auto", tools: ask.allowed.map((name) => ({ type: "function", name })) } }
      : ask.choice === undefined
      ? {}
      : { tool_choice: typeof ask.choice === "string" ? ask.choice : { type: "function", name: ask.choice.name } }),
    ...(ask.parallel === false ? { parallel_tool_calls: false } : {})
  }),
  whole: (body) => responsesOutput(body.output),
  streamed: (events) => {
    const end = events.find((e) => e.type === "response.completed" || e.type === "response.failed")
    const error = end?.type === "response.failed" ? `${end.response.error.code}: ${end.response.error.message}` : undefined
    return { ...responsesOutput(end?.response.output ?? []), error }
  }
}

const messagesChoice = (ask: Ask): object | undefined => {
  const disable = ask.parallel === false ? { disable_parallel_tool_use: true } : {}
  switch (ask.choice) {
    case undefined:
      return ask.parallel === false ? { type: "auto", ...disable } : undefined
    case "auto":
      return { type: "auto", ...disable }
    case "none":
      return { type: "none" }
    case "required":
      return { type: "any", ...disable }
    default:
      return { type: "tool", name: ask.choice.name, ...disable }
  }
}

const messages: ApiClient = {
  name: "Messages",
  path: "/v1/messages",
  headers: { "anthropic-version": "2023-06-01" },
  body: (ask) => {
    const choice = messagesChoice(ask)
    return {
      model: ask.model,
      stream: ask.stream,
      max_tokens: 256,
      messages: [{ role: "user", content: ask.key }],
      tools: TOOLS.map(([name, input_schema]) => ({ name, input_schema })),
      ...(choice === undefined ? {} : { tool_choice: choice })
    }
  },
  whole: (body) => ({
    text: body.content.filter((b: any) => b.type === "text").map((b: any) => b.text).join(""),
    calls: body.content.filter((b: any) => b.type === "tool_use").map((b: any) => ({ name: b.name, args: b.input }))
  }),
  streamed: (events) => {
    let text = ""
    const blocks = new Map<number, { name: string; args: string }>()
    let error: string | undefined
    for (const e of events) {
      if (e.type === "error") error = `${e.error.type}: ${e.error.message}`
      if (e.type === "content_block_start" && e.content_block.type === "tool_use") blocks.set(e.index, { name: e.content_block.name, args: "" })
      if (e.type === "content_block_delta" && e.delta.type === "text_delta") text += e.delta.text
      if (e.type === "content_block_delta" && e.delta.type === "input_json_delta") {
        const block = blocks.get(e.index)
        if (block !== undefined) block.args += e.delta.partial_json
      }
    }
    return { text, calls: [...blocks.values()].map((b) => ({ name: b.name, args: args(b.args) })), error }
  }
}

const APIS = [chatCompletions, responses, messages] as const

/** The JSON of every `data:` line of an SSE body (`[DONE]` left out; `event:` lines too). */
const sseJson = (raw: string): ReadonlyArray<any> =>
  raw.split("\n").filter((line) => line.startsWith("data: ") && line !== "data: [DONE]").map((line) => JSON.parse(line.slice(6)))

// ---------------------------------------------------------------------------------------------- the edge

let upstream: FakeUpstream
let edge: InProcessEdge

beforeAll(async () => {
  upstream = await startFakeUpstream(handle)
  const provider = { type: "openai", baseUrl: upstream.url, model: FAKE_MODEL }
  edge = await startInProcessEdge({
    config: {
      runs: { toolValidationAttempts: ATTEMPTS },
      models: [
        { id: "plain", provider },
        // Not strict: its streams are buffered only when tool_choice binds the answer.
        { id: "buffered", provider, output: { streamBuffer: true } }
      ]
    }
  })
})
afterAll(async () => {
  await edge?.stop()
  await upstream?.close()
})

const ask = async (api: ApiClient, a: Ask): Promise<Answer> => {
  const response = await postJson(`${edge.url}${api.path}`, api.body(a), api.headers)
  if (response.status !== 200) {
    const body: any = await response.json()
    const e = body.error
    return { status: response.status, text: "", calls: [], error: `${e.code ?? e.type}: ${e.message}` }
  }
  if (!a.stream) return { status: 200, ...api.whole(await response.json()), error: undefined }
  expect(response.headers.get("content-type")).toContain("text/event-stream")
  return { status: 200, ...api.streamed(sseJson(await response.text())) }
}

// ---------------------------------------------------------------------------------------------- the semantics

describe.each(APIS)("$name: tool_choice and parallel_tool_calls held for an upstream that cannot constrain", (api) => {
  it("none: the upstream's tool-call markup stays the text it is, no call (streamed and not)", async () => {
    for (const stream of [false, true]) {
      const key = scenario("none markup", { text: `Like this: ${HERMES}` })
      const got = await ask(api, { model: "plain", key, stream, choice: "none" })
      expect(got, `stream: ${stream}`).toEqual({ status: 200, text: `Like this: ${HERMES}`, calls: [], error: undefined })
      expect(upstreamBodies(key)).toHaveLength(1)
    }
  })

  it("none: a native call the upstream made anyway is replayed; the text answer that follows is the answer", async () => {
    const key = scenario("none native", { calls: [weatherIn("Oslo")] }, { text: "It is sunny." })
    const got = await ask(api, { model: "plain", key, stream: false, choice: "none" })
    expect(got).toEqual({ status: 200, text: "It is sunny.", calls: [], error: undefined })
    expect(upstreamBodies(key)).toHaveLength(2)
  })

  it("required: a reply without a call is replayed (exactly: same request upstream), and the call is the answer", async () => {
    const key = scenario("required late", { text: "I'd rather chat." }, { text: "Still chatting." }, { calls: [weatherIn("Oslo")] })
    const got = await ask(api, { model: "plain", key, stream: false, choice: "required" })
    expect(got).toEqual({ status: 200, text: "", calls: [weatherIn("Oslo")], error: undefined })
    const bodies = upstreamBodies(key)
    expect(bodies).toHaveLength(3)
    // An upstream that cannot constrain gets the same request again (no grammar, nothing added).
    expect(bodies[1]).toEqual(bodies[0])
    expect(bodies[2]).toEqual(bodies[0])
  })

  it("required: no call within runs.toolValidationAttempts is the typed error (HTTP 502), after exactly that many runs", async () => {
    const key = scenario("required never", { text: "No." })
    const got = await ask(api, { model: "plain", key, stream: false, choice: "required" })
    expect(got.status).toBe(502)
    expect(got.error).toContain("tool_choice is \"required\" but the response called no tool")
    expect(api === messages ? got.error : got.error?.startsWith("tool_validation_error")).toBeTruthy()
    expect(upstreamBodies(key)).toHaveLength(ATTEMPTS)
  })

  it("required: a call to a tool the request does not have is no valid call: replayed", async () => {
    const key = scenario("required undeclared", { calls: [{ name: "rm_rf", args: {} }] }, { calls: [timeIn("UTC")] })
    const got = await ask(api, { model: "plain", key, stream: false, choice: "required" })
    expect(got.calls).toEqual([timeIn("UTC")])
    expect(upstreamBodies(key)).toHaveLength(2)
  })

  it("named: a call to another function is replayed; only the named function is answered", async () => {
    const key = scenario("named other", { calls: [timeIn("UTC")] }, { calls: [weatherIn("Rome")] })
    const got = await ask(api, { model: "plain", key, stream: false, choice: { name: "get_weather" } })
    expect(got).toEqual({ status: 200, text: "", calls: [weatherIn("Rome")], error: undefined })
    expect(upstreamBodies(key)).toHaveLength(2)
  })

  it("named: only other functions within the attempts is the typed error naming the function", async () => {
    const key = scenario("named never", { calls: [timeIn("UTC")] })
    const got = await ask(api, { model: "plain", key, stream: false, choice: { name: "get_weather" } })
    expect(got.status).toBe(502)
    expect(got.error).toContain("tool_choice allows only tool \"get_weather\" but the response called \"get_time\"")
    expect(upstreamBodies(key)).toHaveLength(ATTEMPTS)
  })

  it("parallel_tool_calls false: an upstream that made two calls answers the first only (streamed and not)", async () => {
    for (const stream of [false, true]) {
      const key = scenario("parallel", { calls: [weatherIn("Oslo"), timeIn("CET")] })
      const got = await ask(api, { model: "plain", key, stream, parallel: false })
      expect(got, `stream: ${stream}`).toEqual({ status: 200, text: "", calls: [weatherIn("Oslo")], error: undefined })
      expect(upstreamBodies(key)[0]?.["parallel_tool_calls"]).toBe(false)
      // Without it both calls are answered.
      const both = await ask(api, { model: "plain", key: scenario("parallel allowed", { calls: [weatherIn("Oslo"), timeIn("CET")] }), stream })
      expect(both.calls).toEqual([weatherIn("Oslo"), timeIn("CET")])
    }
  })

  it("a live stream cannot take back what it wrote: required with no call ends with the error event, no replay", async () => {
    const key = scenario("required live", { text: "No." })
    const got = await ask(api, { model: "plain", key, stream: true, choice: "required" })
    expect(got.status).toBe(200)
    expect(got.error).toContain("tool_choice is \"required\" but the response called no tool")
    expect(got.calls).toEqual([])
    expect(upstreamBodies(key)).toHaveLength(1)
  })

  it("output.streamBuffer: a stream whose tool_choice binds the answer is replayed before its first byte", async () => {
    const required = scenario("required buffered", { text: "No." }, { calls: [weatherIn("Oslo")] })
    expect(await ask(api, { model: "buffered", key: required, stream: true, choice: "required" }))
      .toEqual({ status: 200, text: "", calls: [weatherIn("Oslo")], error: undefined })
    expect(upstreamBodies(required)).toHaveLength(2)
    const named = scenario("named buffered", { calls: [timeIn("UTC")] }, { calls: [weatherIn("Rome")] })
    expect(await ask(api, { model: "buffered", key: named, stream: true, choice: { name: "get_weather" } }))
      .toEqual({ status: 200, text: "", calls: [weatherIn("Rome")], error: undefined })
    expect(upstreamBodies(named)).toHaveLength(2)
    // Under plain auto nothing binds the answer: the stream stays live (one run, the call as the upstream made it).
    const auto = scenario("auto buffered", { calls: [timeIn("UTC")] })
    expect((await ask(api, { model: "buffered", key: auto, stream: true })).calls).toEqual([timeIn("UTC")])
    expect(upstreamBodies(auto)).toHaveLength(1)
  })
})

describe("Responses allowed_tools, held for an upstream that cannot constrain", () => {
  it("only the allowed functions go upstream; a call to another one is replayed, an allowed call is the answer", async () => {
    const key = scenario("allowed", { calls: [timeIn("UTC")] }, { calls: [weatherIn("Lima")] })
    const got = await ask(responses, { model: "plain", key, stream: false, allowed: ["get_weather"] })
    expect(got).toEqual({ status: 200, text: "", calls: [weatherIn("Lima")], error: undefined })
    const bodies = upstreamBodies(key)
    expect(bodies).toHaveLength(2)
    expect((bodies[0]?.["tools"] as ReadonlyArray<any>).map((t) => t.function.name)).toEqual(["get_weather"])
  })

  it("in auto mode a text answer is fine; a call outside the list within every attempt is the typed error", async () => {
    const text = scenario("allowed text", { text: "Nothing to call." })
    expect(await ask(responses, { model: "plain", key: text, stream: false, allowed: ["get_weather"] }))
      .toEqual({ status: 200, text: "Nothing to call.", calls: [], error: undefined })
    const never = scenario("allowed never", { calls: [timeIn("UTC")] })
    const got = await ask(responses, { model: "plain", key: never, stream: false, allowed: ["get_weather"] })
    expect(got.status).toBe(502)
    expect(got.error).toContain("allowed_tools does not allow tool \"get_time\"")
    expect(upstreamBodies(never)).toHaveLength(ATTEMPTS)
  })
})

describe("iop_tool_calls_total over HTTP", () => {
  it("counts each request once by outcome, constraint none for an upstream that says nothing of it", async () => {
    const before = await fetchMetrics(edge.url)
    const count = (text: string, outcome: string) =>
      metricSum(text, "iop_tool_calls_total", { model: "plain", outcome, constraint: "none" })
    await ask(chatCompletions, { model: "plain", key: scenario("metric valid", { calls: [weatherIn("Oslo")] }), stream: false })
    await ask(messages, {
      model: "plain",
      key: scenario("metric replayed", { text: "no" }, { calls: [weatherIn("Oslo")] }),
      stream: false,
      choice: "required"
    })
    await ask(responses, { model: "plain", key: scenario("metric invalid", { text: "no" }), stream: false, choice: "required" })
    const after = await fetchMetrics(edge.url)
    expect(count(after, "valid") - count(before, "valid")).toBe(1)
    expect(count(after, "valid_after_replay") - count(before, "valid_after_replay")).toBe(1)
    expect(count(after, "invalid") - count(before, "invalid")).toBe(1)
  })
})
