import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import { decodeBody } from "../../src/dialects/chat-completions/request.js"

/** A 400 for a bad body names the field in a few hundred characters: never a schema dump, never the offending value. */

const BIG = "x".repeat(3 * 1024 * 1024)
const RUN = "x".repeat(16)

const ok = { model: "echo", messages: [{ role: "user", content: "hi" }] }

const errorOf = (body: unknown) => {
  const result = decodeBody(typeof body === "string" ? body : JSON.stringify(body))
  if (Either.isRight(result)) throw new Error("expected a 400")
  const { message, param } = result.left
  expect(message.length, message.slice(0, 400)).toBeLessThanOrEqual(300)
  expect(param === null || param.length <= 300).toBe(true)
  // No schema dump.
  expect(message).not.toContain("readonly")
  expect(message).not.toContain("ReadonlyArray")
  expect(message).not.toContain("<->")
  return { message, param }
}

describe("decodeBody: request errors", () => {
  it.each([
    ["messages[0].role", { ...ok, messages: [{ role: BIG, content: "hi" }] }],
    ["temperature", { ...ok, temperature: BIG }],
    ["tool_choice", { ...ok, tool_choice: BIG }],
    ["model", { ...ok, model: { a: BIG } }],
    ["metadata.a", { ...ok, metadata: { a: { b: BIG } } }],
    ["stop", { ...ok, stop: { a: BIG } }],
    ["messages[0].content", { ...ok, messages: [{ role: "user", content: { text: BIG } }] }],
    ["messages[0].tool_calls[0].function.arguments", {
      ...ok,
      messages: [{ role: "assistant", tool_calls: [{ id: "c", function: { name: "f", arguments: { big: BIG } } }] }]
    }]
  ])("a 3 MiB offending value at %s is not quoted back", (field, body) => {
    const { message, param } = errorOf(body)
    expect(param).toBe(field)
    expect(message.startsWith(`${field}: `), message.slice(0, 400)).toBe(true)
    expect(message).not.toContain(RUN)
  })

  it("a small offending value is not quoted back either", () => {
    const { message } = errorOf({ ...ok, messages: [{ role: "robot-overlord", content: "hi" }] })
    expect(message).toBe('messages[0].role: Expected "system" | "developer" | "user" | "assistant" | "tool", actual string')
    expect(errorOf({ ...ok, temperature: 7 }).message).not.toContain("7")
    expect(errorOf({ ...ok, seed: 1.25 }).message).toBe("seed: Expected an integer, actual number")
  })

  it("what was expected is said in words, not as the schema's type (~1 KB before)", () => {
    expect(errorOf({ ...ok, messages: { role: "user" } }).message).toBe("messages: Expected array, actual object")
    expect(errorOf([1, 2]).message).toBe("Expected object, actual array")
    expect(errorOf("null").message).toBe("Expected object, actual null")
    expect(errorOf({ ...ok, messages: [{ role: "user", content: 5 }] }).message).toBe(
      "messages[0].content: Expected string | array | null, actual number"
    )
    expect(errorOf({ ...ok, tool_choice: 5 }).message).toBe(
      'tool_choice: Expected object | "none" | "auto" | "required" | null, actual number'
    )
    expect(errorOf({ ...ok, stream: "yes" }).message).toBe("stream: Expected boolean | null, actual string")
  })

  it("missing fields and specific paths are named as before", () => {
    expect(errorOf({ model: "echo" }).message).toBe("messages: missing (required)")
    expect(errorOf({ ...ok, messages: [] }).message).toBe("messages[0]: missing (required)")
    expect(errorOf({ ...ok, tools: [{ type: "function" }] })).toEqual({
      message: "tools[0].function: missing (required)",
      param: "tools[0].function"
    })
    expect(errorOf({ ...ok, messages: [{ role: "user", content: [{ text: "x" }] }] }).param).toBe("messages[0].content[0].type")
    expect(errorOf({ ...ok, model: "" }).message).toBe("model: Expected a string at least 1 character(s) long, actual string")
  })

  it("a huge key in the path is clipped", () => {
    const key = "k".repeat(100_000)
    const { message, param } = errorOf({ ...ok, metadata: { [key]: 1 } })
    expect(message).toMatch(/^metadata\["k+…"\]: Expected string, actual number$/)
    expect(param?.startsWith('metadata["kkkk')).toBe(true)
  })

  it("a body that is not JSON: a short message, whatever the body's size", () => {
    expect(errorOf("{not json").message).toMatch(/^request body is not valid JSON/)
    expect(errorOf(`{"a": "${BIG}" x}`).message).toMatch(/^request body is not valid JSON/)
    expect(errorOf(`${BIG}`).message).toMatch(/^request body is not valid JSON/)
  })

  it.prop(
    "any value in any field: a message of at most 300 characters that names the field",
    [
      FastCheck.constantFrom("model", "messages", "stream", "tools", "tool_choice", "temperature", "stop", "metadata", "reasoning"),
      FastCheck.jsonValue({ maxDepth: 4 }),
      FastCheck.string({ minLength: 400, maxLength: 2000 })
    ],
    ([field, value, filler]) => {
      const result = decodeBody(JSON.stringify({ ...ok, [field]: value, padding: filler, [filler]: filler }))
      if (Either.isLeft(result)) {
        expect(result.left.message.length).toBeLessThanOrEqual(300)
        expect(result.left.message.startsWith(field)).toBe(true)
      }
    },
    { fastCheck: { numRuns: 300 } }
  )
})
