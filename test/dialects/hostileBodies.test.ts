import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import * as ChatCompletions from "../../src/dialects/chat-completions/dialect.js"
import type { Dialect } from "../../src/dialects/Dialect.js"
import { estimateInputTokens } from "../../src/dialects/messages/countTokens.js"
import * as Messages from "../../src/dialects/messages/Messages.js"
import { decodeCountTokens } from "../../src/dialects/messages/request.js"
import * as Responses from "../../src/dialects/responses/Responses.js"
import { MAX_BODY_DEPTH } from "../../src/dialects/jsonBody.js"
import { toUpstreamBody } from "../../src/providers/openai/upstreamRequest.js"

/**
 * Any body, given to any API's decoder and translator, is an answer or a 400: never a thrown exception (a defect,
 * answered 500). What is accepted also serialises for the upstream (`JSON.stringify` recursing over the body's
 * values, in native and text tool modes) and, for count_tokens, gets its estimate.
 */

const config = Either.getOrThrow(decodeConfigJson("t", {
  models: [
    { id: "m", provider: { type: "echo" } },
    { id: "strict", provider: { type: "echo" }, output: { strict: true } }
  ]
}))
const limits = { maxToolSchemaBytes: 256 * 1024 }

/** Keys a hostile or careless client may send, and the ones the decoders look at. */
const key = FastCheck.oneof(
  FastCheck.string({ maxLength: 6 }),
  FastCheck.constantFrom(
    "__proto__", "constructor", "toString", "hasOwnProperty", "type", "text", "role", "content", "name",
    "parameters", "input_schema", "input", "properties", "items", "$ref", "required", "id", "tool_use_id"
  )
)

const scalar = FastCheck.oneof(
  FastCheck.string({ maxLength: 8 }),
  FastCheck.constantFrom("user", "assistant", "text", "function", "tool_use", "tool_result", "message", "auto", "none"),
  FastCheck.double(),
  FastCheck.integer(),
  FastCheck.boolean(),
  FastCheck.constant(null)
)

const { json } = FastCheck.letrec<{ json: unknown }>((tie) => ({
  json: FastCheck.oneof(
    { depthSize: "small", maxDepth: 5 },
    scalar,
    FastCheck.array(tie("json"), { maxLength: 4 }),
    FastCheck.dictionary(key, tie("json"), { maxKeys: 4 })
  )
}))

/** A value's JSON text, wrapped in `levels` arrays or objects: from shallow to far past the limit. */
const nested = FastCheck.tuple(
  json,
  FastCheck.oneof(FastCheck.integer({ min: 0, max: 3 }), FastCheck.integer({ min: MAX_BODY_DEPTH - 8, max: MAX_BODY_DEPTH + 8 }), FastCheck.constant(5_000)),
  FastCheck.boolean()
).map(([value, levels, objects]) => {
  const text = JSON.stringify(value) ?? "null"
  return objects ? '{"a":'.repeat(levels) + text + "}".repeat(levels) : "[".repeat(levels) + text + "]".repeat(levels)
})

/** Where a value goes in a body that is otherwise well-formed for the API. */
type Template = (value: string) => string

const hi = `[{"role":"user","content":"hi"}]`

const chatTemplates: ReadonlyArray<Template> = [
  (v) => v,
  (v) => `{"model":"m","messages":${v}}`,
  (v) => `{"model":"strict","messages":${hi},"tools":[{"type":"function","function":{"name":"f","parameters":${v}}}]}`,
  (v) => `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi","extra":${v}}]}]}`,
  (v) => `{"model":"m","messages":[{"role":"user","content":[${v}]}]}`,
  (v) => `{"model":"m","messages":${hi},"response_format":${v}}`,
  (v) => `{"model":"m","messages":${hi},"tool_choice":${v},"tools":[{"type":"function","function":{"name":"f"}}]}`,
  (v) => `{"model":"m","messages":[{"role":"assistant","tool_calls":[${v}]},{"role":"tool","tool_call_id":"c","content":"ok"}]}`,
  (v) => `{"model":"m","messages":${hi},"stop":${v},"metadata":${v},"logit_bias":${v}}`
]

const responsesTemplates: ReadonlyArray<Template> = [
  (v) => v,
  (v) => `{"model":"m","input":${v}}`,
  (v) => `{"model":"m","input":[${v}]}`,
  (v) => `{"model":"m","input":[{"role":"user","content":[${v}]}]}`,
  (v) => `{"model":"strict","input":"hi","tools":[{"type":"function","name":"f","parameters":${v}}]}`,
  (v) => `{"model":"m","input":"hi","tools":[${v}],"tool_choice":${v}}`,
  (v) => `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"s","schema":${v}}}}`,
  (v) => `{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":${v}}]}`
]

const messagesTemplates: ReadonlyArray<Template> = [
  (v) => v,
  (v) => `{"model":"m","max_tokens":16,"messages":${v}}`,
  (v) => `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":[${v}]}]}`,
  (v) => `{"model":"strict","max_tokens":16,"messages":${hi},"tools":[{"name":"f","input_schema":${v}}]}`,
  (v) => `{"model":"m","max_tokens":16,"messages":${hi},"tools":[${v}],"tool_choice":${v},"system":${v}}`,
  (v) =>
    `{"model":"m","max_tokens":16,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":${v}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":${v}}]}]}`
]

const body = (templates: ReadonlyArray<Template>) =>
  FastCheck.tuple(FastCheck.constantFrom(...templates), nested).map(([template, value]) => template(value))

/** Decodes and translates as the routes do, then serialises as the OpenAI provider does. */
const translate = <W>(dialect: Dialect<W>, text: string): void => {
  const wire = dialect.decode(text)
  if (Either.isLeft(wire)) {
    expect(wire.left.message.length).toBeLessThanOrEqual(300)
    return
  }
  const model = config.models.find((m) => m.id === dialect.model(wire.right))
  if (model === undefined) return
  const request = dialect.toChatRequest(wire.right, model, limits)
  if (Either.isLeft(request)) {
    expect(request.left.message.length).toBeLessThanOrEqual(300)
    return
  }
  for (const toolMode of ["native", "text"] as const) {
    expect(typeof JSON.stringify(toUpstreamBody(request.right.submit, { upstreamModel: "up", toolMode }))).toBe("string")
  }
}

describe("hostile bodies: a 400 or a request, never a defect", () => {
  const options = { fastCheck: { numRuns: 400 } }

  it.prop("Chat Completions", [body(chatTemplates)], ([text]) => translate(ChatCompletions.dialect, text), options)
  it.prop("Responses", [body(responsesTemplates)], ([text]) => translate(Responses.dialect, text), options)
  it.prop("Messages", [body(messagesTemplates)], ([text]) => translate(Messages.dialect, text), options)
  it.prop("count_tokens", [body(messagesTemplates)], ([text]) => {
    const wire = decodeCountTokens(text)
    if (Either.isRight(wire)) expect(estimateInputTokens(wire.right)).toBeGreaterThanOrEqual(0)
  }, options)

  it.prop("any JSON text at all", [FastCheck.oneof(FastCheck.json(), FastCheck.string())], ([text]) => {
    translate(ChatCompletions.dialect, text)
    translate(Responses.dialect, text)
    translate(Messages.dialect, text)
  }, options)
})

describe("hostile bodies found by the properties", () => {
  it("an object with its own toString where a union's tag is read (Schema converts it with String()): a 400 naming it", () => {
    const text = `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":{"toString":0}}],"tool_choice":{"type":{"toString":0}},"system":{"type":{"toString":0}}}`
    for (const dialect of [Messages.dialect, ChatCompletions.dialect, Responses.dialect] as const) {
      translate(dialect as Dialect<unknown>, text)
    }
    const wire = Messages.dialect.decode(text)
    expect(Either.isLeft(wire) && wire.left.message).toBe("tools[0].type: an object where a plain value was expected")
    const valueOf = decodeCountTokens(`{"model":"m","messages":[{"role":"user","content":[{"type":{"valueOf":1}}]}]}`)
    expect(Either.isLeft(valueOf)).toBe(true)
  })
})
