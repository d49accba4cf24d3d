import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import type { DialectRequest } from "../../../src/chat/buildChatRequest.js"
import { findModel } from "../../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../../src/config/loadConfig.js"
import type { InvalidRequest } from "../../../src/chat/EdgeError.js"
import { RAW_ARGUMENTS_KEY } from "../../../src/dialects/messages/render.js"
import { estimateInputTokens, IMAGE_TOKENS } from "../../../src/dialects/messages/countTokens.js"
import { decodeBody, decodeCountTokens, toChatRequest } from "../../../src/dialects/messages/request.js"
import { toUpstreamBody } from "../../../src/providers/openai/upstreamRequest.js"

const config = Either.getOrThrow(
  decodeConfigJson("t", {
    models: [{ id: "m", provider: { type: "echo" } }, { id: "strict", provider: { type: "echo" }, output: { strict: true } }]
  })
)
const limits = { maxToolSchemaBytes: 262_144 }

const base = { model: "m", max_tokens: 256, messages: [{ role: "user", content: "hi" }] }

/** The body decoded and translated (model `m` unless the body names another). */
const translate = (body: Record<string, unknown>): Either.Either<DialectRequest, InvalidRequest> => {
  const wire = decodeBody(JSON.stringify({ ...base, ...body }))
  if (Either.isLeft(wire)) return Either.left(wire.left)
  const model = findModel(config.models, wire.right.model)
  return model === undefined ? expect.unreachable("model") : toChatRequest(wire.right, model, limits)
}

const ok = (body: Record<string, unknown>): DialectRequest => {
  const r = translate(body)
  if (Either.isLeft(r)) return expect.unreachable(r.left.message)
  return r.right
}

const refused = (body: Record<string, unknown>): InvalidRequest => {
  const r = translate(body)
  if (Either.isRight(r)) return expect.unreachable("accepted")
  expect(r.left.message.length).toBeLessThanOrEqual(300)
  return r.left
}

const user = (...content: ReadonlyArray<unknown>) => ({ role: "user", content })
const assistant = (...content: ReadonlyArray<unknown>) => ({ role: "assistant", content })

describe("Messages request: decode", () => {
  it("max_tokens is required and positive: a 400 naming it", () => {
    const missing = decodeBody(JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }))
    expect(Either.isLeft(missing) && missing.left).toMatchObject({ param: "max_tokens", message: "max_tokens: missing (required)" })
    for (const bad of [0, -1, 1.5, "256"]) {
      const r = decodeBody(JSON.stringify({ ...base, max_tokens: bad }))
      expect(Either.isLeft(r) && r.left.param).toBe("max_tokens")
    }
  })

  it("errors name the field, stay under 300 characters and never quote the value", () => {
    const secret = "sk-live-SECRET-value-that-must-not-echo"
    const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
      [{ messages: [{ role: secret, content: "x" }] }, "messages[0].role"],
      [{ messages: [user({ type: "text" })] }, "messages[0].content[0].text"],
      [{ messages: [user({ type: "image", source: { type: "base64", data: secret } })] }, "messages[0].content[0].source.media_type"],
      [{ messages: [assistant({ type: "tool_use", id: "t1", name: "x", input: secret })] }, "messages[0].content[0].input"],
      [{ messages: [] }, "messages[0]"],
      [{ temperature: 1.5 }, "temperature"],
      [{ tools: [{ name: "" }] }, "tools[0].name"],
      [{ tool_choice: { type: secret } }, "tool_choice.type"],
      [{ model: 7 }, "model"]
    ]
    for (const [body, param] of cases) {
      const r = decodeBody(JSON.stringify({ ...base, ...body }))
      if (Either.isRight(r)) return expect.unreachable(`accepted ${param}`)
      expect(r.left.param).toBe(param)
      expect(r.left.message.startsWith(`${param}: `)).toBe(true)
      expect(r.left.message.length).toBeLessThanOrEqual(300)
      expect(r.left.message).not.toContain("SECRET")
    }
    const json = decodeBody(`{"model": "m", "max_tokens": ${JSON.stringify(secret)}`)
    expect(Either.isLeft(json) && json.left.message).toBe("request body is not valid JSON")
  })

  it("unknown fields are accepted and ignored: cache_control, context_management, anthropic's future fields", () => {
    const r = ok({
      context_management: { edits: [] },
      service_tier: "auto",
      system: [{ type: "text", text: "be brief", cache_control: { type: "ephemeral" } }],
      messages: [user({ type: "text", text: "hi", cache_control: { type: "ephemeral" }, citations: null })]
    })
    expect(r.submit.messages).toEqual([{ role: "system", content: "be brief" }, { role: "user", content: "hi" }])
  })
})

describe("Messages request: translation", () => {
  it("system as a string or text blocks is one leading system message; Claude Code's billing header block is left out", () => {
    expect(ok({ system: "be brief" }).submit.messages[0]).toEqual({ role: "system", content: "be brief" })
    const r = ok({
      system: [
        { type: "text", text: "x-anthropic-billing-header: cc_version=2.1.197.fbe; cc_entrypoint=sdk-cli;" },
        { type: "text", text: "You are Claude Code." },
        { type: "text", text: "Be careful." }
      ]
    })
    expect(r.submit.messages[0]).toEqual({ role: "system", content: "You are Claude Code.\n\nBe careful." })
    expect(r.notForwarded?.["parts"]).toBe("system: the x-anthropic-billing-header block")
    expect(ok({ system: "" }).submit.messages).toEqual([{ role: "user", content: "hi" }])
  })

  it("user text blocks: one is a string, several are text parts; images become image_url parts (data: URL or URL)", () => {
    expect(ok({ messages: [user({ type: "text", text: "a" })] }).submit.messages).toEqual([{ role: "user", content: "a" }])
    const r = ok({
      messages: [
        user(
          { type: "text", text: "look" },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
          { type: "image", source: { type: "url", url: "https://example.com/cat.jpg" } }
        )
      ]
    })
    expect(r.submit.messages).toEqual([{
      role: "user",
      content: [
        { type: "text", text: "look" },
        { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
        { type: "image_url", image_url: { url: "https://example.com/cat.jpg" } }
      ]
    }])
    expect(refused({ messages: [user({ type: "image", source: { type: "file", file_id: "f" } })] }).param).toBe(
      "messages[0].content[0].source"
    )
  })

  it("documents: text and content sources are text, a base64 PDF is a file part, other sources are refused", () => {
    const r = ok({
      messages: [
        user(
          { type: "document", source: { type: "text", media_type: "text/plain", data: "notes" } },
          { type: "document", source: { type: "base64", media_type: "application/pdf", data: "JVBERi0=" }, title: "a.pdf" }
        )
      ]
    })
    expect(r.submit.messages[0]?.content).toEqual([
      { type: "text", text: "notes" },
      { type: "file", file: { filename: "a.pdf", file_data: "data:application/pdf;base64,JVBERi0=" } }
    ])
    expect(refused({ messages: [user({ type: "document", source: { type: "url", url: "https://x/a.pdf" } })] }).param).toBe(
      "messages[0].content[0].source"
    )
  })

  it("assistant tool_use → tool_calls with the input's JSON; tool_result → one tool message each, first, then the rest", () => {
    const r = ok({
      messages: [
        user({ type: "text", text: "list files" }),
        assistant(
          { type: "text", text: "Sure." },
          { type: "tool_use", id: "toolu_1", name: "Bash", input: { command: "ls" } },
          { type: "tool_use", id: "toolu_2", name: "Read", input: {} }
        ),
        user(
          { type: "text", text: "<system-reminder>x</system-reminder>" },
          { type: "tool_result", tool_use_id: "toolu_1", content: "a.txt\nb.txt" },
          { type: "tool_result", tool_use_id: "toolu_2", content: [{ type: "text", text: "line 1" }, { type: "text", text: "line 2" }], is_error: true }
        )
      ]
    })
    expect(r.submit.messages.slice(1)).toEqual([
      {
        role: "assistant",
        content: "Sure.",
        tool_calls: [
          { id: "toolu_1", type: "function", function: { name: "Bash", arguments: "{\"command\":\"ls\"}" } },
          { id: "toolu_2", type: "function", function: { name: "Read", arguments: "{}" } }
        ]
      },
      { role: "tool", tool_call_id: "toolu_1", content: "a.txt\nb.txt" },
      { role: "tool", tool_call_id: "toolu_2", content: "Error: line 1\nline 2" },
      { role: "user", content: "<system-reminder>x</system-reminder>" }
    ])
  })

  it("an assistant turn with calls only has null content; a wrapped non-object input comes back as the text the model wrote", () => {
    const r = ok({
      messages: [
        user({ type: "text", text: "go" }),
        assistant({ type: "tool_use", id: "t1", name: "x", input: { [RAW_ARGUMENTS_KEY]: "[1, 2]" } })
      ]
    })
    expect(r.submit.messages[1]).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [{ id: "t1", type: "function", function: { name: "x", arguments: "[1, 2]" } }]
    })
  })

  it("images in a tool result follow the tool messages in one user message (a tool message carries text only)", () => {
    const r = ok({
      messages: [
        user({ type: "text", text: "shot" }),
        assistant({ type: "tool_use", id: "t1", name: "Screenshot", input: {} }),
        user({
          type: "tool_result",
          tool_use_id: "t1",
          content: [{ type: "text", text: "done" }, { type: "image", source: { type: "base64", media_type: "image/png", data: "AA==" } }]
        })
      ]
    })
    expect(r.submit.messages.slice(2)).toEqual([
      { role: "tool", tool_call_id: "t1", content: "done" },
      {
        role: "user",
        content: [
          { type: "text", text: "Images returned by tool call t1:" },
          { type: "image_url", image_url: { url: "data:image/png;base64,AA==" } }
        ]
      }
    ])
  })

  it("thinking → reasoning_content of its assistant message; redacted_thinking and unknown blocks are left out with a note", () => {
    const r = ok({
      messages: [
        user({ type: "text", text: "q" }),
        assistant(
          { type: "thinking", thinking: "let me think", signature: "sig" },
          { type: "redacted_thinking", data: "opaque" },
          { type: "server_tool_use", id: "srvtoolu_1", name: "web_search", input: {} },
          { type: "text", text: "answer" }
        ),
        user({ type: "search_result", source: "x", title: "t", content: [] }, { type: "text", text: "more" })
      ]
    })
    expect(r.submit.messages[1]).toEqual({ role: "assistant", content: "answer", reasoning_content: "let me think" })
    expect(r.submit.messages[2]).toEqual({ role: "user", content: "more" })
    expect(r.notForwarded?.["parts"]).toBe("messages[1].content[1] (redacted_thinking), messages[1].content[2] (server_tool_use), messages[2].content[0] (search_result)")
  })

  it("system entries mid-history (Claude Code) stay system messages in place", () => {
    const r = ok({
      messages: [
        user({ type: "text", text: "a" }),
        { role: "system", content: "Available agent types: ..." },
        { role: "system", content: [{ type: "text", text: "one" }, { type: "text", text: "two" }] },
        assistant({ type: "text", text: "b" })
      ]
    })
    expect(r.submit.messages).toEqual([
      { role: "user", content: "a" },
      { role: "system", content: "Available agent types: ..." },
      { role: "system", content: "one\n\ntwo" },
      { role: "assistant", content: "b" }
    ])
  })

  it("a block in the wrong role is refused, naming it", () => {
    expect(refused({ messages: [user({ type: "tool_use", id: "t", name: "x", input: {} })] }).param).toBe("messages[0].content[0]")
    expect(refused({ messages: [assistant({ type: "tool_result", tool_use_id: "t", content: "x" })] }).param).toBe(
      "messages[0].content[0]"
    )
    expect(refused({ messages: [{ role: "system", content: [{ type: "image", source: { type: "url", url: "u" } }] }] }).param)
      .toBe("messages[0].content[0]")
  })

  it("tools: the caller's tools are function tools; server tools are left out with a note; input_schema is required", () => {
    const schema = { type: "object", properties: { command: { type: "string" } }, required: ["command"] }
    const r = ok({
      tools: [
        { type: "web_search_20250305", name: "web_search", max_uses: 3 },
        { name: "Bash", description: "Run a command", input_schema: schema, cache_control: { type: "ephemeral" } },
        { type: "bash_20250124", name: "bash" },
        { type: "custom", name: "Read", input_schema: { type: "object" } }
      ]
    })
    expect(r.submit.tools).toEqual([
      { type: "function", function: { name: "Bash", description: "Run a command", parameters: schema } },
      { type: "function", function: { name: "Read", parameters: { type: "object" } } }
    ])
    expect(r.notForwarded?.["parts"]).toBe("tools[0] (web_search_20250305), tools[2] (bash_20250124)")
    expect(refused({ tools: [{ name: "Bash" }] })).toMatchObject({ param: "tools[0].input_schema" })
  })

  it("tool_choice: auto, any → required, tool → that function, none; disable_parallel_tool_use → parallelToolCalls false", () => {
    const tools = [{ name: "Bash", input_schema: { type: "object" } }]
    expect(ok({ tools, tool_choice: { type: "auto" } }).submit.toolChoice).toBe("auto")
    expect(ok({ tools, tool_choice: { type: "any" } }).submit.toolChoice).toBe("required")
    expect(ok({ tools, tool_choice: { type: "none" } }).submit.toolChoice).toBe("none")
    const forced = ok({ tools, tool_choice: { type: "tool", name: "Bash", disable_parallel_tool_use: true } })
    expect(forced.submit.toolChoice).toEqual({ type: "function", function: { name: "Bash" } })
    expect(forced.submit.parallelToolCalls).toBe(false)
    expect(ok({ tools, tool_choice: { type: "auto", disable_parallel_tool_use: false } }).submit).not.toHaveProperty("parallelToolCalls")
    expect(ok({ tool_choice: { type: "any" } }).submit).not.toHaveProperty("toolChoice")
    expect(refused({ tools, tool_choice: { type: "tool", name: "Write" } }).param).toBe("tool_choice")
  })

  it("thinking enabled or adaptive exposes reasoning (strict models too); disabled or absent hides it", () => {
    expect(ok({ thinking: { type: "enabled", budget_tokens: 1024 } }).policy.exposeReasoning).toBe(true)
    expect(ok({ thinking: { type: "adaptive" } }).policy.exposeReasoning).toBe(true)
    expect(ok({ model: "strict", thinking: { type: "enabled", budget_tokens: 1024 } }).policy.exposeReasoning).toBe(true)
    expect(ok({ thinking: { type: "disabled" } }).policy.exposeReasoning).toBe(false)
    expect(ok({}).policy.exposeReasoning).toBe(false)
  })

  it("sampling: max_tokens, temperature, top_p, stop_sequences, metadata.user_id; top_k noted; usage always; stream", () => {
    const r = ok({
      max_tokens: 1000,
      temperature: 0.2,
      top_p: 0.9,
      top_k: 40,
      stop_sequences: ["END"],
      metadata: { user_id: "u-1" },
      stream: true
    })
    expect(r.submit.sampling).toEqual({
      maxTokens: 1000,
      maxTokensField: "max_tokens",
      temperature: 0.2,
      topP: 0.9,
      stop: ["END"],
      user: "u-1",
      responseFormat: undefined
    })
    expect(r.notForwarded?.["parts"]).toBe("top_k")
    expect(r.includeUsage).toBe(true)
    expect(r.stream).toBe(true)
    expect(r.api).toBe("messages")
    expect(ok({ metadata: { user_id: "u".repeat(257) } }).submit.sampling.user).toBeUndefined()
    expect(ok({}).stream).toBe(false)
  })

  it("output_config.format json_schema → the json_schema response format", () => {
    const schema = { type: "object", properties: { title: { type: "string" } }, required: ["title"] }
    const r = ok({ output_config: { format: { type: "json_schema", schema }, effort: "high" } })
    expect(r.submit.sampling.responseFormat).toEqual({ type: "json_schema", json_schema: { name: "output", schema } })
  })

  it("reaches the upstream body as Chat Completions fields", () => {
    const r = ok({
      system: "sys",
      max_tokens: 77,
      stop_sequences: ["\n\nHuman:"],
      tools: [{ name: "Bash", input_schema: { type: "object" } }],
      tool_choice: { type: "any", disable_parallel_tool_use: true }
    })
    expect(toUpstreamBody(r.submit, { upstreamModel: "up", toolMode: "native" })).toMatchObject({
      model: "up",
      messages: [{ role: "system", content: "sys" }, { role: "user", content: "hi" }],
      max_tokens: 77,
      stop: ["\n\nHuman:"],
      stream: false,
      tools: [{ type: "function", function: { name: "Bash", parameters: { type: "object" } } }],
      tool_choice: "required",
      parallel_tool_calls: false
    })
  })
})

describe("count_tokens estimate", () => {
  it("ceil(characters / 4) over system, messages and tools, plus 1600 per image", () => {
    const wire = decodeCountTokens(JSON.stringify({
      model: "m",
      system: "12345678",
      messages: [
        { role: "user", content: "abcd" },
        assistant({ type: "tool_use", id: "t", name: "ab", input: { a: 1 } }),
        user({ type: "tool_result", tool_use_id: "t", content: [{ type: "text", text: "xyz" }] }, {
          type: "image",
          source: { type: "url", url: "u" }
        })
      ],
      tools: [{ name: "T", description: "d", input_schema: { type: "object" } }, { type: "web_search_20250305", name: "web_search" }]
    }))
    if (Either.isLeft(wire)) return expect.unreachable(wire.left.message)
    // 8 + 4 + ("ab" + '{"a":1}' = 9) + 3 + ("T" + "d" + '{"type":"object"}' = 19) = 43 chars → 11 tokens.
    expect(estimateInputTokens(wire.right)).toBe(11 + IMAGE_TOKENS)
  })

  it("needs no max_tokens, and is at least 1", () => {
    const wire = decodeCountTokens(JSON.stringify({ model: "m", messages: [{ role: "user", content: "" }] }))
    expect(Either.isRight(wire) && estimateInputTokens(wire.right)).toBe(1)
  })
})
