import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import type { DialectRequest } from "../../../src/chat/buildChatRequest.js"
import { findModel } from "../../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../../src/config/loadConfig.js"
import type { InvalidRequest } from "../../../src/chat/EdgeError.js"
import { ATTACHED_BELOW } from "../../../src/dialects/responses/input.js"
import { decodeBody, toChatRequest } from "../../../src/dialects/responses/request.js"
import { toUpstreamBody } from "../../../src/providers/openai/upstreamRequest.js"

/** The Responses translator: input items, instructions, tools, tool_choice, text.format, refusals naming fields. */

const config = Either.getOrThrow(decodeConfigJson("t", {
  runs: { maxToolSchemaBytes: 1000 },
  models: [
    { id: "m", provider: { type: "echo" } },
    { id: "strict", provider: { type: "echo" }, output: { strict: true } }
  ]
}))

const translate = (body: Record<string, unknown>): Either.Either<DialectRequest, InvalidRequest> =>
  Either.flatMap(decodeBody(JSON.stringify({ model: "m", input: "hi", ...body })), (wire) => {
    const model = findModel(config.models, wire.model)
    return model === undefined ? expect.unreachable("no model") : toChatRequest(wire, model, { maxToolSchemaBytes: 1000 })
  })

const ok = (body: Record<string, unknown>): DialectRequest => {
  const result = translate(body)
  if (Either.isLeft(result)) return expect.unreachable(result.left.message)
  return result.right
}

const refused = (body: Record<string, unknown>): InvalidRequest => {
  const result = translate(body)
  if (Either.isRight(result)) return expect.unreachable("expected a 400")
  expect(result.left.message.length).toBeLessThanOrEqual(300)
  if (result.left.param !== null) expect(result.left.message.startsWith(result.left.param)).toBe(true)
  return result.left
}

const messagesOf = (body: Record<string, unknown>) => ok(body).submit.messages

describe("Responses request: input", () => {
  it("a string input is one user message; instructions are a leading system message", () => {
    expect(messagesOf({ input: "hello", instructions: "be brief" })).toEqual([
      { role: "system", content: "be brief" },
      { role: "user", content: "hello" }
    ])
  })

  it("messages of every role, with and without type; one text part is a string, several are parts", () => {
    expect(messagesOf({
      input: [
        { type: "message", role: "developer", content: [{ type: "input_text", text: "rules" }] },
        { role: "system", content: "sys" },
        { role: "user", content: [{ type: "input_text", text: "a" }, { type: "input_text", text: "b" }] },
        { type: "message", role: "assistant", id: "msg_1", status: "completed", content: [{ type: "output_text", text: "ok", annotations: [] }] },
        { role: "user", content: [] }
      ]
    })).toEqual([
      { role: "developer", content: "rules" },
      { role: "system", content: "sys" },
      { role: "user", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] },
      { role: "assistant", content: "ok" },
      { role: "user", content: "" }
    ])
  })

  it("input_image by URL (with detail) and input_file by data; a file_id or file_url is refused, naming the field", () => {
    expect(messagesOf({
      input: [{
        role: "user",
        content: [
          { type: "input_text", text: "what is this?" },
          { type: "input_image", image_url: "data:image/png;base64,AAAA", detail: "low" },
          { type: "input_file", file_data: "data:application/pdf;base64,BBBB", filename: "a.pdf" }
        ]
      }]
    })).toEqual([{
      role: "user",
      content: [
        { type: "text", text: "what is this?" },
        { type: "image_url", image_url: { url: "data:image/png;base64,AAAA", detail: "low" } },
        { type: "file", file: { file_data: "data:application/pdf;base64,BBBB", filename: "a.pdf" } }
      ]
    }])
    const image = refused({ input: [{ role: "user", content: [{ type: "input_text", text: "x" }, { type: "input_image", file_id: "file-1" }] }] })
    expect(image.param).toBe("input[0].content[1].file_id")
    expect(image.message).toContain("image_url")
    expect(refused({ input: [{ role: "user", content: [{ type: "input_file", file_url: "https://x/a.pdf" }] }] }).param).toBe("input[0].content[0].file_url")
    expect(refused({ input: [{ role: "user", content: [{ type: "input_image" }] }] }).param).toBe("input[0].content[0].image_url")
  })

  it("function calls join the assistant message before them; their outputs are tool messages", () => {
    expect(messagesOf({
      input: [
        { role: "user", content: "weather in Oslo and Rome?" },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Checking." }] },
        { type: "function_call", id: "fc_1", call_id: "call_1", name: "get_weather", arguments: "{\"city\":\"Oslo\"}", status: "completed" },
        { type: "function_call", call_id: "call_2", name: "get_weather", arguments: "{\"city\":\"Rome\"}" },
        { type: "function_call_output", call_id: "call_1", output: "sunny" },
        { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "rain" }] },
        { type: "function_call", call_id: "call_3", name: "get_time", arguments: "{}" },
        { type: "function_call_output", call_id: "call_3", output: "noon" }
      ]
    })).toEqual([
      { role: "user", content: "weather in Oslo and Rome?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } },
          { id: "call_2", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Rome\"}" } }
        ]
      },
      { role: "tool", content: "sunny", tool_call_id: "call_1" },
      { role: "tool", content: "rain", tool_call_id: "call_2" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_3", type: "function", function: { name: "get_time", arguments: "{}" } }] },
      { role: "tool", content: "noon", tool_call_id: "call_3" }
    ])
  })

  it("images in a tool's output follow the turn's tool results as a user message (Codex's view_image)", () => {
    expect(messagesOf({
      input: [
        { type: "function_call", call_id: "c1", name: "view_image", arguments: "{}" },
        { type: "function_call", call_id: "c2", name: "ls", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: [{ type: "input_image", image_url: "data:image/png;base64,AAAA" }] },
        { type: "function_call_output", call_id: "c2", output: "a.txt" },
        { role: "user", content: "and?" }
      ]
    })).toEqual([
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "c1", type: "function", function: { name: "view_image", arguments: "{}" } },
          { id: "c2", type: "function", function: { name: "ls", arguments: "{}" } }
        ]
      },
      { role: "tool", content: ATTACHED_BELOW, tool_call_id: "c1" },
      { role: "tool", content: "a.txt", tool_call_id: "c2" },
      { role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }] },
      { role: "user", content: "and?" }
    ])
  })

  it("a reasoning item is the reasoning_content of the assistant turn after it; with none after it, it is dropped", () => {
    expect(messagesOf({
      input: [
        { role: "user", content: "q" },
        { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "step 1" }, { type: "summary_text", text: "step 2" }], encrypted_content: "opaque" },
        { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: "r" },
        { type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: "raw thoughts" }] },
        { role: "assistant", content: "answer" },
        { type: "reasoning", summary: [{ type: "summary_text", text: "lost" }] },
        { role: "user", content: "next" },
        { type: "reasoning", summary: [{ type: "summary_text", text: "trailing" }] }
      ]
    })).toEqual([
      { role: "user", content: "q" },
      { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }], reasoning_content: "step 1\n\nstep 2" },
      { role: "tool", content: "r", tool_call_id: "c1" },
      { role: "assistant", content: "answer", reasoning_content: "raw thoughts" },
      { role: "user", content: "next" }
    ])
  })

  it("custom_tool_call is a function call with {input}; other item types are dropped and listed for the debug log", () => {
    const request = ok({
      input: [
        { role: "user", content: "patch it" },
        { type: "custom_tool_call", call_id: "c1", name: "apply_patch", input: "*** Begin Patch\n*** End Patch" },
        { type: "custom_tool_call_output", call_id: "c1", output: "Done" },
        { type: "web_search_call", id: "ws_1", status: "completed", action: { type: "search", query: "x" } },
        { type: "local_shell_call", id: "ls_1", call_id: "c2", action: { type: "exec", command: ["ls"] }, status: "completed" },
        { type: "local_shell_call_output", id: "c2", output: "a" },
        { type: "web_search_call", id: "ws_2", status: "completed" }
      ]
    })
    expect(request.submit.messages).toEqual([
      { role: "user", content: "patch it" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "apply_patch", arguments: JSON.stringify({ input: "*** Begin Patch\n*** End Patch" }) } }]
      },
      { role: "tool", content: "Done", tool_call_id: "c1" }
    ])
    expect(request.notForwarded).toEqual({ input: "local_shell_call,local_shell_call_output,web_search_call" })
  })

  it("an item_reference not resolved (no response store), an empty input and malformed items are 400s naming the item", () => {
    expect(refused({ input: [{ role: "user", content: "x" }, { type: "item_reference", id: "msg_1" }] })).toMatchObject({ param: "input[1]" })
    // OpenAI's typeless reference: an id and no role.
    expect(refused({ input: [{ id: "msg_1" }] })).toMatchObject({ param: "input[0]" })
    expect(refused({ input: [{ type: "item_reference" }] }).message).toBe("input[0].id: missing (required)")
    expect(refused({ input: [] })).toMatchObject({ param: "input" })
    expect(refused({ input: [{ role: "user", content: "x" }, { type: "function_call", name: "f", arguments: "{}" }] }).message).toBe(
      "input[1].call_id: missing (required)"
    )
    expect(refused({ input: [{ role: "robot", content: "x" }] }).message).toBe(
      'input[0].role: Expected "user" | "assistant" | "system" | "developer", actual string'
    )
    expect(refused({ input: [{ role: "user", content: [{ type: "input_audio", data: "x" }] }] }).param).toBe("input[0].content[0].type")
    expect(refused({ input: [{ type: "function_call_output", call_id: "c", output: 5 }] }).param).toBe("input[0].output")
    expect(refused({ input: 5 }).param).toBe("input")
  })

  it("a large offending value is never quoted back", () => {
    const big = "x".repeat(100_000)
    const e = refused({ input: [{ role: big, content: "hi" }] })
    expect(e.message).not.toContain("xxxxxxxxxx")
    const t = refused({ tools: [{ type: "function", name: "f", parameters: big }] })
    expect(t.param).toBe("tools[0].parameters")
    expect(t.message).not.toContain("xxxxxxxxxx")
  })
})

describe("Responses request: tools and tool_choice", () => {
  const weather = { type: "function", name: "get_weather", description: "Weather", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: true }

  it("function tools are forwarded in Chat Completions shape; every other tool type is not, and is listed", () => {
    const request = ok({
      tools: [
        { type: "web_search", external_web_access: true },
        weather,
        { type: "namespace", name: "multi_agent_v1", tools: [{ type: "function", name: "spawn" }] },
        { type: "custom", name: "apply_patch", format: { type: "grammar" } },
        { type: "function", name: "ls", description: null, parameters: null, strict: null },
        { type: "local_shell" },
        { type: "web_search" }
      ]
    })
    expect(request.submit.tools).toEqual([
      { type: "function", function: { name: "get_weather", description: "Weather", parameters: weather.parameters, strict: true } },
      { type: "function", function: { name: "ls" } }
    ])
    expect(request.tools.map((t) => t.name)).toEqual(["get_weather", "ls"])
    expect(request.notForwarded).toEqual({ tools: "custom,local_shell,namespace,web_search" })
    expect(ok({ tools: [weather] }).notForwarded).toBeUndefined()
  })

  it("a schema over maxToolSchemaBytes names the tool by its index in the caller's tools", () => {
    const big = { type: "function", name: "big", parameters: { type: "object", description: "d".repeat(2000) } }
    expect(refused({ tools: [{ type: "web_search" }, weather, big] }).param).toBe("tools[2].parameters")
  })

  it("tool_choice: the modes as they are, a function in chat shape, allowed_tools narrowing the tools", () => {
    for (const mode of ["auto", "none", "required"] as const) expect(ok({ tools: [weather], tool_choice: mode }).submit.toolChoice).toBe(mode)
    const forced = ok({ tools: [weather], tool_choice: { type: "function", name: "get_weather" } })
    expect(forced.submit.toolChoice).toEqual({ type: "function", function: { name: "get_weather" } })
    expect(forced.toolChoice).toEqual({ _tag: "Function", name: "get_weather" })
    const allowed = ok({
      tools: [weather, { type: "function", name: "ls" }],
      tool_choice: { type: "allowed_tools", mode: "required", tools: [{ type: "function", name: "ls" }, { type: "web_search" }] }
    })
    expect(allowed.submit.tools.map((t) => t.function.name)).toEqual(["ls"])
    expect(allowed.submit.toolChoice).toBe("required")
    expect(allowed.toolChoice).toEqual({ _tag: "Required" })
    // In auto mode the allow-list is still held at the edge: a call to any other tool is refused.
    const allowedAuto = ok({
      tools: [weather, { type: "function", name: "ls" }],
      tool_choice: { type: "allowed_tools", mode: "auto", tools: [{ type: "function", name: "ls" }] }
    })
    expect(allowedAuto.submit.toolChoice).toBe("auto")
    expect(allowedAuto.toolChoice).toEqual({ _tag: "Auto", allowedTools: true })
    expect(ok({ tools: [weather], tool_choice: "auto" }).toolChoice).toEqual({ _tag: "Auto" })
    expect(ok({ tools: [weather] }).submit.toolChoice).toBeUndefined()
  })

  it("tool_choice naming no function tool, forcing a hosted tool, or malformed: a 400 naming tool_choice", () => {
    expect(refused({ tools: [weather], tool_choice: { type: "function", name: "nope" } }).param).toBe("tool_choice")
    const hosted = refused({ tools: [weather], tool_choice: { type: "web_search_preview" } })
    expect(hosted.param).toBe("tool_choice")
    expect(hosted.message).toContain("only function tools")
    expect(refused({ tool_choice: { type: "function" } }).param).toBe("tool_choice.name")
    expect(refused({ tool_choice: "sometimes" }).param).toBe("tool_choice")
  })
})

describe("Responses request: sampling, text.format, reasoning", () => {
  it("max_output_tokens, temperature, top_p, effort, user and parallel_tool_calls reach the upstream", () => {
    const request = ok({
      max_output_tokens: 64,
      temperature: 0.5,
      top_p: 0.9,
      reasoning: { effort: "high" },
      user: "u-1",
      parallel_tool_calls: false,
      tools: [{ type: "function", name: "f" }]
    })
    expect(request.submit.sampling).toMatchObject({ maxTokens: 64, maxTokensField: "max_completion_tokens", temperature: 0.5, topP: 0.9, reasoningEffort: "high", user: "u-1" })
    expect(toUpstreamBody(request.submit, { upstreamModel: "up", toolMode: "native" })).toMatchObject({
      max_completion_tokens: 64,
      temperature: 0.5,
      top_p: 0.9,
      reasoning_effort: "high",
      user: "u-1",
      parallel_tool_calls: false
    })
    expect(request.includeUsage).toBe(true)
    expect(request.api).toBe("responses")
    expect(ok({}).submit.sampling.maxTokensField).toBeUndefined()
  })

  it("text.format: json_schema and json_object in response_format's shape; text is nothing", () => {
    const schema = { type: "object", properties: { a: { type: "string" } } }
    expect(ok({ text: { format: { type: "json_schema", name: "out", schema, strict: true }, verbosity: "low" } }).submit.sampling.responseFormat).toEqual({
      type: "json_schema",
      json_schema: { name: "out", schema, strict: true }
    })
    expect(ok({ text: { format: { type: "json_object" } } }).submit.sampling.responseFormat).toEqual({ type: "json_object" })
    expect(ok({ text: { format: { type: "text" } } }).submit.sampling.responseFormat).toBeUndefined()
    expect(refused({ text: { format: { type: "json_schema", schema } } }).param).toBe("text.format.name")
    expect(refused({ text: { format: { type: "yaml" } } }).param).toBe("text.format.type")
  })

  it("a reasoning summary shows reasoning even on a strict model; without one, the model's default", () => {
    const strict = (body: Record<string, unknown>) => Either.getOrThrow(Either.flatMap(
      decodeBody(JSON.stringify({ model: "strict", input: "hi", ...body })),
      (wire) => toChatRequest(wire, config.models[1] ?? expect.unreachable("strict"), { maxToolSchemaBytes: 1000 })
    ))
    expect(strict({ reasoning: { summary: "auto" } }).policy.exposeReasoning).toBe(true)
    expect(strict({ reasoning: { generate_summary: "concise" } }).policy.exposeReasoning).toBe(true)
    expect(strict({ reasoning: { effort: "low" } }).policy.exposeReasoning).toBe(false)
    expect(ok({}).policy.exposeReasoning).toBe(true)
    expect(ok({ reasoning: { summary: null } }).policy.exposeReasoning).toBe(true)
  })

  it("metadata reaches the run; store, include, prompt_cache_key, service_tier, truncation and unknown fields are accepted", () => {
    const request = ok({
      metadata: { iop_trace_stream: "true" },
      store: true,
      include: ["reasoning.encrypted_content"],
      prompt_cache_key: "k",
      service_tier: "auto",
      truncation: "auto",
      stream_options: { include_obfuscation: false },
      client_metadata: { thread_id: "t" },
      safety_identifier: "s"
    })
    expect(request.submit.metadata).toEqual({ iop_trace_stream: "true" })
  })
})

describe("Responses request: what needs state the edge has not", () => {
  it("previous_response_id not resolved (no response store): a 400 naming it, saying to send the whole conversation", () => {
    const e = refused({ previous_response_id: "resp_1" })
    expect(e).toMatchObject({ param: "previous_response_id" })
    expect(e.message).toBe("previous_response_id: stored responses are not available here: send the whole conversation in input")
    expect(ok({ previous_response_id: null }).submit.messages).toHaveLength(1)
    expect(refused({ previous_response_id: "" }).param).toBe("previous_response_id")
  })

  it("conversation, prompt, background, top_logprobs and logprobs in include: 400s naming them", () => {
    expect(refused({ conversation: "conv_1" }).param).toBe("conversation")
    expect(refused({ prompt: { id: "pmpt_1" } }).param).toBe("prompt")
    expect(refused({ background: true }).param).toBe("background")
    expect(ok({ background: false }).submit.messages).toHaveLength(1)
    expect(refused({ top_logprobs: 2 }).param).toBe("top_logprobs")
    expect(refused({ include: ["message.output_text.logprobs"] }).param).toBe("include")
  })

  it("a body that is not JSON, or not an object", () => {
    expect(Either.isLeft(decodeBody("{"))).toBe(true)
    const e = decodeBody("[1]")
    expect(Either.isLeft(e) && e.left.message).toBe("Expected object, actual array")
  })
})
