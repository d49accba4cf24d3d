import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import OpenAI from "openai"
import { chunk, completionTokens, textStream } from "../../support/fakeUpstream.js"
import { sse, testEdge, toolCallChunk, weather } from "./edge.js"

/**
 * `POST /v1/responses` through the official `openai` SDK (`responses.create`, `responses.stream`) against an edge
 * in this process, whose models answer from a fake Chat Completions upstream.
 */

const usage = completionTokens(11, 7, { cached: 3, reasoning: 2 })

const caught = <A>(promise: () => Promise<A>) =>
  Effect.promise(() => promise().then((value) => Either.right(value), (error: unknown) => Either.left(error)))

const drain = <E>(events: AsyncIterable<E>) =>
  Effect.promise(async () => {
    const out: Array<E> = []
    for await (const e of events) out.push(e)
    return out
  })

const apiError = (result: Either.Either<unknown, unknown>): InstanceType<typeof OpenAI.APIError> => {
  const error = Either.isLeft(result) ? result.left : undefined
  expect(error).toBeInstanceOf(OpenAI.APIError)
  return error instanceof OpenAI.APIError ? error : expect.unreachable("not an APIError")
}

describe("Responses API through the openai SDK", () => {
  it.scopedLive("create: text, with usage, instructions as the system message, the caller's model name", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse(textStream(["Hel", "lo"], { usage })))
      const response = yield* Effect.promise(() =>
        edge.client().responses.create({ model: "gpt-5.5", instructions: "Be brief.", input: "hi", max_output_tokens: 50 })
      )
      expect(response.id).toMatch(/^resp_/)
      expect(response.object).toBe("response")
      expect(response.status).toBe("completed")
      expect(response.model).toBe("gpt-5.5")
      expect(response.output_text).toBe("Hello")
      expect(response.output).toEqual([
        expect.objectContaining({ type: "message", role: "assistant", status: "completed", content: [expect.objectContaining({ type: "output_text", text: "Hello" })] })
      ])
      expect(response.usage).toEqual({
        input_tokens: 11,
        input_tokens_details: { cached_tokens: 3 },
        output_tokens: 7,
        output_tokens_details: { reasoning_tokens: 2 },
        total_tokens: 18
      })
      expect(response.max_output_tokens).toBe(50)
      expect(edge.upstreamBodies()[0]).toMatchObject({
        messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "hi" }],
        max_completion_tokens: 50,
        stream: false
      })
      // Counted under the Responses API, its usage too (labelled by the model's id, not the alias).
      const metrics = yield* Effect.promise(() => fetch(`${edge.url}/metrics`).then((r) => r.text()))
      expect(metrics).toContain('iop_chat_requests_total{api="responses",model="model",stream="false",outcome="success"} 1')
      expect(metrics).toContain('iop_tokens_total{api="responses",model="model",outcome="success",kind="output"} 7')
    }))

  it.scopedLive("create: a native tool call is a function_call item; only function tools reach the upstream, the others are logged once", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse([toolCallChunk("{\"city\":\"Oslo\"}"), chunk({ finish_reason: "tool_calls" })]))
      const response = yield* Effect.promise(() =>
        edge.client().responses.create({
          model: "model",
          input: "weather in Oslo?",
          tools: [weather, { type: "web_search" }, { type: "custom", name: "apply_patch" }]
        })
      )
      expect(response.status).toBe("completed")
      expect(response.output).toEqual([
        expect.objectContaining({ type: "function_call", call_id: "call_up_1", name: "get_weather", arguments: "{\"city\":\"Oslo\"}", status: "completed" })
      ])
      const sent = edge.upstreamBodies()[0]
      expect(sent?.["tools"]).toEqual([{ type: "function", function: { name: "get_weather", description: weather.description, parameters: weather.parameters, strict: false } }])
      const notForwarded = edge.logs.filter((l) => l.message === "request parts not forwarded")
      expect(notForwarded).toEqual([expect.objectContaining({ level: "DEBUG", annotations: expect.objectContaining({ not_forwarded_tools: "custom,web_search" }) })])
    }))

  it.scopedLive("create: a <tool_call> in the upstream's text (tools described in the prompt) is a function_call item", () =>
    Effect.gen(function* () {
      const markup = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"
      const edge = yield* testEdge(sse(textStream(["Let me check. ", markup.slice(0, 20), markup.slice(20)])))
      const response = yield* Effect.promise(() =>
        edge.client().responses.create({ model: "text-tools", input: "weather in Oslo?", tools: [weather] })
      )
      expect(response.output.map((o) => o.type)).toEqual(["message", "function_call"])
      expect(response.output_text).toBe("Let me check. ")
      const call = response.output[1]
      expect(call?.type === "function_call" && JSON.parse(call.arguments)).toEqual({ city: "Oslo" })
      expect(call?.type === "function_call" && call.call_id).toMatch(/^call_/)
      // Text mode: the upstream got no tools field, the tools in the system prompt.
      const sent = edge.upstreamBodies()[0]
      expect(sent?.["tools"]).toBeUndefined()
      expect(JSON.stringify(sent?.["messages"])).toContain("<tools>")
    }))

  it.scopedLive("create: upstream reasoning_content is a reasoning item before the message; a function_call round trip", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge((_, n) =>
        n === 0
          ? sse(textStream(["It is sunny."], { reasoning: ["The user ", "wants weather."] }))
          : sse(textStream(["ok"]))
      )
      const client = edge.client()
      const first = yield* Effect.promise(() => client.responses.create({ model: "model", input: "weather?", reasoning: { summary: "auto" } }))
      expect(first.output.map((o) => o.type)).toEqual(["reasoning", "message"])
      expect(first.output[0]).toMatchObject({ type: "reasoning", summary: [{ type: "summary_text", text: "The user wants weather." }] })
      expect(first.output_text).toBe("It is sunny.")
      // The client sends the output back with a tool result: the upstream gets the Chat Completions history.
      yield* Effect.promise(() =>
        client.responses.create({
          model: "model",
          input: [
            { role: "user", content: "weather?" },
            ...first.output.flatMap((o) => (o.type === "reasoning" || o.type === "message" ? [o] : [])),
            { type: "function_call", call_id: "call_9", name: "get_weather", arguments: "{\"city\":\"Oslo\"}" },
            { type: "function_call_output", call_id: "call_9", output: "sunny" }
          ],
          tools: [weather]
        })
      )
      expect(edge.upstreamBodies()[1]?.["messages"]).toEqual([
        { role: "user", content: "weather?" },
        {
          role: "assistant",
          content: "It is sunny.",
          reasoning_content: "The user wants weather.",
          tool_calls: [{ id: "call_9", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }]
        },
        { role: "tool", content: "sunny", tool_call_id: "call_9" }
      ])
    }))

  it.scopedLive("an upstream 400 is a BadRequestError with the upstream's code, stream and not; an unknown previous_response_id is OpenAI's 400", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge({
        kind: "json",
        status: 400,
        body: { error: { message: "maximum context length is 8192 tokens", type: "invalid_request_error", code: "context_length_exceeded" } }
      })
      const client = edge.client()
      for (const stream of [false, true]) {
        const error = apiError(yield* caught(async () => {
          const answer = await client.responses.create({ model: "model", input: "hi", stream })
          if (stream && Symbol.asyncIterator in answer) for await (const _ of answer) void _
          return answer
        }))
        expect(error).toBeInstanceOf(OpenAI.BadRequestError)
        expect(error.code).toBe("context_length_exceeded")
        expect(error.message).toContain("maximum context length is 8192 tokens")
      }
      const stored = apiError(yield* caught(() => client.responses.create({ model: "model", input: "hi", previous_response_id: "resp_1" })))
      expect(stored).toBeInstanceOf(OpenAI.BadRequestError)
      expect(stored.param).toBe("previous_response_id")
      expect(stored.code).toBe("previous_response_not_found")
      expect(stored.message).toContain("Previous response with id 'resp_1' not found.")
      const unknown = apiError(yield* caught(() => client.responses.create({ model: "nope", input: "hi" })))
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError)
      expect(edge.upstream.requests.length).toBe(2)
    }))

  it.scopedLive("strict: an invalid first answer is replayed; the client gets the valid call, the upstream saw 2 requests", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge((_, n) =>
        sse([toolCallChunk(n === 0 ? "{\"city\": 1}" : "{\"city\":\"Oslo\"}"), chunk({ finish_reason: "tool_calls" })])
      )
      const response = yield* Effect.promise(() =>
        edge.client().responses.create({
          model: "strict",
          input: "weather in Oslo?",
          tools: [weather, { type: "web_search" }],
          tool_choice: "required"
        })
      )
      expect(response.output).toEqual([expect.objectContaining({ type: "function_call", name: "get_weather", arguments: "{\"city\":\"Oslo\"}" })])
      expect(edge.upstream.requests.length).toBe(2)
      // Once per request, not per attempt.
      expect(edge.logs.filter((l) => l.message === "request parts not forwarded")).toHaveLength(1)
    }))

  it.scopedLive("strict: still invalid after the attempts: a 502 tool_validation_error, not retried by the SDK", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse([toolCallChunk("{\"city\": 1}"), chunk({ finish_reason: "tool_calls" })]))
      const error = apiError(yield* caught(() =>
        edge.client({ maxRetries: 2 }).responses.create({ model: "strict", input: "x", tools: [weather] })
      ))
      expect(error.status).toBe(502)
      expect(error.type).toBe("tool_validation_error")
      expect(edge.upstream.requests.length).toBe(2)
    }))

  it.scopedLive("stream: the events in order, every item closed, finalResponse() the completed response", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse([
        ...textStream(["Sun", "ny"], { reasoning: ["hm"] }).slice(0, -1),
        toolCallChunk("{\"city\":\"Oslo\"}"),
        chunk({ finish_reason: "tool_calls" }),
        chunk({ usage })
      ]))
      const stream = edge.client().responses.stream({ model: "model", input: "weather?", tools: [weather] })
      const events: Array<{ type: string; seq: number }> = []
      const textDeltas: Array<string> = []
      stream.on("response.output_text.delta", (e) => textDeltas.push(e.delta))
      for (const event of yield* drain(stream)) events.push({ type: event.type, seq: event.sequence_number })
      const final = yield* Effect.promise(() => stream.finalResponse())
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
      expect(events.map((e) => e.type)).toEqual([
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        ...textDeltas.map(() => "response.output_text.delta"),
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed"
      ])
      expect(textDeltas.join("")).toBe("Sunny")
      expect(final.status).toBe("completed")
      expect(final.output_text).toBe("Sunny")
      expect(final.output.map((o) => o.type)).toEqual(["reasoning", "message", "function_call"])
      expect(final.output[2]).toMatchObject({ name: "get_weather", arguments: "{\"city\":\"Oslo\"}", call_id: "call_up_1" })
      expect(final.usage?.total_tokens).toBe(18)
    }))

  it.scopedLive("stream: a length finish ends with response.incomplete (max_output_tokens)", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse(textStream(["cut"], { finish_reason: "length" })))
      const stream = yield* Effect.promise(() => edge.client().responses.create({ model: "model", input: "x", stream: true, max_output_tokens: 1 }))
      const events = yield* drain(stream)
      const types = events.map((e) => e.type)
      const last = events[events.length - 1]
      expect(types[types.length - 1]).toBe("response.incomplete")
      expect(last?.type === "response.incomplete" && last.response.incomplete_details).toEqual({ reason: "max_output_tokens" })
    }))

  it.scopedLive("stream: a run that fails after output ends with response.failed, its open message closed", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge({ kind: "reset", before: [chunk({ role: "assistant", content: "partial" })] })
      const stream = yield* Effect.promise(() => edge.client().responses.create({ model: "model", input: "x", stream: true }))
      const events = yield* drain(stream)
      const types = events.map((e) => e.type)
      const last = events[events.length - 1]
      expect(types.slice(-4)).toEqual(["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.failed"])
      expect(last?.type === "response.failed" && last.response.error?.code).toBe("server_error")
      expect(last?.type === "response.failed" && last.response.output).toEqual([expect.objectContaining({ type: "message", status: "incomplete" })])
    }))
})

describe("recorded Codex requests", () => {
  const fixture = (name: string): Record<string, unknown> => {
    const recorded: { body: Record<string, unknown> } = JSON.parse(readFileSync(new URL(`../../agents/fixtures/${name}`, import.meta.url), "utf8"))
    return recorded.body
  }

  it.scopedLive("turn 2 of a Codex exec (developer messages, a function_call and its output, non-function tools) streams to response.completed", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse(textStream(["It printed hi."], { reasoning: ["The command ran."] })))
      for (const name of ["codex-fallback.turn2.request.json", "codex-gpt55.turn2.request.json"]) {
        const body = { ...fixture(name), model: "gpt-5.5" }
        const answer = yield* Effect.promise(() =>
          fetch(`${edge.url}/v1/responses`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
        )
        expect(answer.status).toBe(200)
        expect(answer.headers.get("content-type")).toContain("text/event-stream")
        const text = yield* Effect.promise(() => answer.text())
        const types = Array.from(text.matchAll(/^event: (.*)$/gm), (m) => m[1])
        expect(types[0]).toBe("response.created")
        expect(types[types.length - 1]).toBe("response.completed")
        expect(types).toContain("response.reasoning_summary_text.delta")
      }
      const [fallback, gpt55] = edge.upstreamBodies()
      const roles = (b: Record<string, unknown> | undefined) =>
        Array.isArray(b?.["messages"]) ? b["messages"].map((m: { role: string }) => m.role) : []
      expect(roles(fallback)).toEqual(["developer", "developer", "user", "user", "assistant", "tool"])
      expect(roles(gpt55)).toEqual(["developer", "developer", "user", "user", "assistant", "tool"])
      const toolNames = (b: Record<string, unknown> | undefined) =>
        Array.isArray(b?.["tools"]) ? b["tools"].map((t: { function: { name: string } }) => t.function.name) : []
      expect(toolNames(fallback)).toContain("exec_command")
      expect(toolNames(gpt55)).not.toContain("apply_patch")
      const logged = edge.logs.filter((l) => l.message === "request parts not forwarded").map((l) => l.annotations["not_forwarded_tools"])
      expect(logged).toEqual(["namespace,web_search", "custom,tool_search,web_search"])
    }))
})
