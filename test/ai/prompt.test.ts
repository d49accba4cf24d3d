import * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { type Request, toolChoice, toWireRequest } from "../../src/ai/prompt.js"
import { ChatCompletionRequest } from "../../src/dialects/chat-completions/wire.js"

const GetWeather = Tool.make("GetWeather", {
  description: "Weather in a city",
  parameters: { city: Schema.String, days: Schema.optional(Schema.Int) },
  success: Schema.String
})

const request = (prompt: Prompt.RawInput, fields: Partial<Request> = {}): Request => ({
  prompt: Prompt.make(prompt),
  tools: [],
  toolChoice: "auto",
  responseFormat: { type: "text" },
  ...fields
})

const wire = (prompt: Prompt.RawInput, fields: Partial<Request> = {}) => toWireRequest("m", {}, request(prompt, fields))

const right = <A>(e: Either.Either<A, string>): A =>
  Either.getOrElse(e, (reason) => expect.fail(`expected a request, got: ${reason}`))

const decodeWire = Schema.decodeUnknownEither(ChatCompletionRequest)

describe("the prompt as a Chat Completions request", () => {
  it("a conversation: system, user, an assistant turn with reasoning and a call, its result, in order", () => {
    const out = right(wire([
      { role: "system", content: "be brief" },
      { role: "user", content: "Weather in Oslo?" },
      {
        role: "assistant",
        content: [
          { type: "reasoning", text: "need " },
          { type: "reasoning", text: "the tool" },
          { type: "text", text: "Checking." },
          { type: "tool-call", id: "c1", name: "GetWeather", params: { city: "Oslo" } }
        ]
      },
      { role: "tool", content: [{ type: "tool-result", id: "c1", name: "GetWeather", isFailure: false, result: "sunny", providerExecuted: false }] },
      { role: "user", content: [{ type: "text", text: "and " }, { type: "text", text: "tomorrow?" }] }
    ]))
    expect(out.messages).toEqual([
      { role: "system", content: "be brief" },
      { role: "user", content: "Weather in Oslo?" },
      {
        role: "assistant",
        content: "Checking.",
        reasoning_content: "need the tool",
        tool_calls: [{ id: "c1", type: "function", function: { name: "GetWeather", arguments: "{\"city\":\"Oslo\"}" } }]
      },
      { role: "tool", tool_call_id: "c1", content: "\"sunny\"" },
      { role: "user", content: [{ type: "text", text: "and " }, { type: "text", text: "tomorrow?" }] }
    ])
    expect(out).toMatchObject({ model: "m", stream_options: { include_usage: true } })
    expect(Either.isRight(decodeWire(out))).toBe(true)
  })

  it("an assistant turn of calls alone has null content; results it holds follow it; provider-executed ones are not sent", () => {
    const out = right(wire([
      { role: "user", content: "go" },
      {
        role: "assistant",
        content: [
          { type: "tool-call", id: "c1", name: "a", params: {} },
          { type: "tool-call", id: "p1", name: "search", params: {}, providerExecuted: true },
          { type: "tool-result", id: "p1", name: "search", isFailure: false, result: [], providerExecuted: true },
          { type: "tool-result", id: "c1", name: "a", isFailure: true, result: { error: "no" }, providerExecuted: false }
        ]
      }
    ]))
    expect(out.messages.slice(1)).toEqual([
      { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "a", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "c1", content: "{\"error\":\"no\"}" }
    ])
  })

  it("files: images as image_url (bytes, URL, base64 text), PDFs as file parts, anything else refused", () => {
    const out = right(wire([{
      role: "user",
      content: [
        { type: "file", mediaType: "image/png", data: new Uint8Array([1, 2, 3]) },
        { type: "file", mediaType: "image/jpeg", data: new URL("https://example.com/a.jpg") },
        { type: "file", mediaType: "image/gif", data: "R0lGOD" },
        { type: "file", mediaType: "application/pdf", fileName: "a.pdf", data: "JVBER" }
      ]
    }]))
    expect(out.messages[0]?.content).toEqual([
      { type: "image_url", image_url: { url: "data:image/png;base64,AQID" } },
      { type: "image_url", image_url: { url: "https://example.com/a.jpg" } },
      { type: "image_url", image_url: { url: "data:image/gif;base64,R0lGOD" } },
      { type: "file", file: { file_data: "data:application/pdf;base64,JVBER", filename: "a.pdf" } }
    ])
    expect(wire([{ role: "user", content: [{ type: "file", mediaType: "audio/wav", data: "UklG" }] }])).toEqual(
      Either.left("a file of type 'audio/wav' has no Chat Completions part (images and PDFs do)")
    )
    expect(Either.isLeft(wire([{ role: "assistant", content: [{ type: "file", mediaType: "image/png", data: "AA" }] }]))).toBe(true)
  })

  it("tools: the toolkit's JSON Schemas and descriptions, with the tool choice; none without tools", () => {
    const out = right(wire("hi", { tools: [GetWeather], toolChoice: "required" }))
    expect(out.tools).toEqual([{
      type: "function",
      function: {
        name: "GetWeather",
        description: "Weather in a city",
        parameters: {
          type: "object",
          properties: { city: { type: "string" }, days: { type: "integer", description: "an integer", title: "int" } },
          required: ["city"],
          additionalProperties: false
        }
      }
    }])
    expect(out.tool_choice).toBe("required")
    const bare = right(wire("hi", { toolChoice: "none" }))
    expect("tools" in bare || "tool_choice" in bare).toBe(false)
    expect(Either.isRight(decodeWire(out))).toBe(true)
  })

  it("a provider-defined tool is refused: the edge serves function tools", () => {
    const WebSearch = Tool.providerDefined({
      id: "openai.web_search",
      toolkitName: "WebSearch",
      providerName: "web_search",
      args: {}
    })
    expect(wire("hi", { tools: [WebSearch({})] })).toEqual(
      Either.left("the tool 'WebSearch' is defined by a provider (openai.web_search): the edge serves function tools")
    )
  })

  it("tool choice: the modes as they are, a named tool as a function, oneOf by its mode (the tools are already narrowed)", () => {
    expect(toolChoice("auto")).toBe("auto")
    expect(toolChoice("none")).toBe("none")
    expect(toolChoice("required")).toBe("required")
    expect(toolChoice({ tool: "GetWeather" })).toEqual({ type: "function", function: { name: "GetWeather" } })
    expect(toolChoice({ oneOf: ["a"] })).toBe("auto")
    expect(toolChoice({ mode: "auto", oneOf: ["a"] })).toBe("auto")
    expect(toolChoice({ mode: "required", oneOf: ["a"] })).toBe("required")
  })

  it("the response format: generateObject's schema as json_schema over the config's; text keeps the config's", () => {
    const schema = Schema.Struct({ city: Schema.String })
    const config = { temperature: 0.2, response_format: { type: "json_object" } }
    const json = right(toWireRequest("m", config, request("hi", { responseFormat: { type: "json", objectName: "place", schema } })))
    expect(json.response_format).toEqual({
      type: "json_schema",
      json_schema: {
        name: "place",
        schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false }
      }
    })
    expect(json.temperature).toBe(0.2)
    expect(right(toWireRequest("m", config, request("hi"))).response_format).toEqual({ type: "json_object" })
  })

  it("an empty prompt, and a value JSON cannot hold, are refused", () => {
    expect(wire([])).toEqual(Either.left("the prompt has no messages"))
    expect(wire([{ role: "assistant", content: [{ type: "tool-call", id: "c", name: "a", params: { n: 1n } }] }])).toEqual(
      Either.left("the parameters of tool call c cannot be written as JSON")
    )
  })
})

const text = fc.string({ maxLength: 12 })
const json = fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.parse(JSON.stringify(v)) as unknown)
const id = fc.stringMatching(/^call_[a-z0-9]{1,6}$/)

const message: fc.Arbitrary<Prompt.MessageEncoded> = fc.oneof(
  text.map((content) => ({ role: "system" as const, content })),
  text.map((content) => ({ role: "user" as const, content })),
  fc.array(text, { minLength: 1, maxLength: 3 }).map((texts) => ({
    role: "user" as const,
    content: texts.map((t) => ({ type: "text" as const, text: t }))
  })),
  fc.array(
    fc.oneof(
      text.map((t) => ({ type: "text" as const, text: t })),
      text.map((t) => ({ type: "reasoning" as const, text: t })),
      fc.record({ id, name: fc.constantFrom("a", "b"), params: json }).map((c) => ({ type: "tool-call" as const, ...c }))
    ),
    { maxLength: 4 }
  ).map((content) => ({ role: "assistant" as const, content })),
  fc.array(fc.record({ id, result: json, isFailure: fc.boolean() }), { minLength: 1, maxLength: 3 }).map((results) => ({
    role: "tool" as const,
    content: results.map((r) => ({ type: "tool-result" as const, name: "a", providerExecuted: false, ...r }))
  }))
)

/** How many wire messages a prompt message becomes. */
const wireCount = (m: Prompt.MessageEncoded): number => (m.role === "tool" ? m.content.length : 1)

describe("the prompt mapping, for any conversation", () => {
  it.prop(
    "a request the edge's own schema decodes; one wire message per message (a result each); calls and results as JSON that reads back",
    [fc.array(message, { minLength: 1, maxLength: 8 })],
    ([messages]) => {
      const out = right(wire(messages))
      expect(Either.isRight(decodeWire(out))).toBe(true)
      expect(out.messages).toHaveLength(messages.reduce((n, m) => n + wireCount(m), 0))
      const sentCalls = out.messages.flatMap((m) => m.tool_calls ?? []).map((c) => [c.id, JSON.parse(c.function.arguments)])
      const calls = messages.flatMap((m) =>
        m.role === "assistant" && typeof m.content !== "string"
          ? m.content.flatMap((p) => (p.type === "tool-call" ? [[p.id, p.params ?? null]] : []))
          : []
      )
      expect(sentCalls).toEqual(calls)
      const sentResults = out.messages.flatMap((m) =>
        m.role === "tool" && typeof m.content === "string" ? [[m.tool_call_id, JSON.parse(m.content)]] : []
      )
      const results = messages.flatMap((m) => (m.role === "tool" ? m.content.map((p) => [p.id, p.result ?? null]) : []))
      expect(sentResults).toEqual(results)
      // The user's and the system's words, as they wrote them.
      const words = (role: string, content: unknown) =>
        (role === "system" || role === "user") && typeof content === "string" ? [[role, content]] : []
      // A user turn of one text part is sent as a plain string.
      const asSent = (m: Prompt.MessageEncoded) =>
        m.role === "user" && typeof m.content !== "string" && m.content.length === 1 && m.content[0]?.type === "text"
          ? m.content[0].text
          : m.content
      expect(out.messages.flatMap((w) => words(w.role, w.content))).toEqual(messages.flatMap((m) => words(m.role, asSent(m))))
    },
    { fastCheck: { numRuns: 300 } }
  )
})
