import { describe, expect, it } from "@effect/vitest"
import { wrapAsCompletionTool } from "../../../src/chat/toolcalls/completionTool.js"
import type { RequestTool } from "../../../src/chat/toolcalls/types.js"

const tools: ReadonlyArray<RequestTool> = [
  {
    name: "attempt_completion",
    parameters: {
      type: "object",
      properties: { result: { type: "string" }, command: { type: "string" } },
      required: ["result"]
    }
  },
  {
    name: "final_answer",
    parameters: {
      type: "object",
      properties: { answer: { type: "string" }, n: { type: "integer" } },
      required: ["answer", "n"]
    }
  },
  {
    name: "done",
    parameters: { type: "object", properties: { a: { type: "string" }, b: { type: "string" } }, required: ["a", "b"] }
  },
  { name: "bare" }
]

describe("wrapAsCompletionTool", () => {
  it("puts the text into the only required string parameter", () => {
    expect(wrapAsCompletionTool("All done.", "attempt_completion", tools)).toEqual({
      name: "attempt_completion",
      arguments: JSON.stringify({ result: "All done." })
    })
    expect(wrapAsCompletionTool("42", "final_answer", tools)).toEqual({
      name: "final_answer",
      arguments: JSON.stringify({ answer: "42" })
    })
  })

  it("falls back to result when there is no single required string parameter", () => {
    expect(wrapAsCompletionTool("x", "done", tools)?.arguments).toBe(JSON.stringify({ result: "x" }))
    expect(wrapAsCompletionTool("x", "bare", tools)?.arguments).toBe(JSON.stringify({ result: "x" }))
  })

  it("is undefined when the request has no such tool", () => {
    expect(wrapAsCompletionTool("x", "missing", tools)).toBeUndefined()
  })

  it("keeps the text exactly, quotes and newlines included", () => {
    const text = "line \"one\"\n<tool_call>\ttwo"
    const call = wrapAsCompletionTool(text, "attempt_completion", tools)
    expect(JSON.parse(call?.arguments ?? "null")).toEqual({ result: text })
  })
})
