import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import {
  HIDDEN_REASONING_CONTENT,
  REASONING_OUT_OF_TOKENS_CONTENT,
  reasoningOnlyContent
} from "../../src/chat/reasoningFallback.js"

describe("reasoning-only fallback", () => {
  it("gives the trimmed reasoning when the caller asked for it", () => {
    expect(reasoningOnlyContent({ reasoning: "\n  The answer is 4.\n", finishReason: "stop", exposeReasoning: true }))
      .toBe("The answer is 4.")
  })

  it("says the reasoning was hidden when the caller did not ask for it", () => {
    expect(reasoningOnlyContent({ reasoning: "secret plan", finishReason: "stop", exposeReasoning: false }))
      .toBe(HIDDEN_REASONING_CONTENT)
  })

  it("says the model ran out of tokens while reasoning", () => {
    expect(reasoningOnlyContent({ reasoning: "secret plan", finishReason: "length", exposeReasoning: false }))
      .toBe(REASONING_OUT_OF_TOKENS_CONTENT)
    expect(reasoningOnlyContent({ reasoning: " plan ", finishReason: "length", exposeReasoning: true }))
      .toBe(`plan\n\n${REASONING_OUT_OF_TOKENS_CONTENT}`)
  })

  it("never leaks hidden reasoning into content", () => {
    const content = reasoningOnlyContent({ reasoning: "the secret", finishReason: "stop", exposeReasoning: false })
    expect(content).not.toContain("secret")
  })

  it("falls back to the placeholder when exposed reasoning is only whitespace", () => {
    expect(reasoningOnlyContent({ reasoning: " \n ", finishReason: "stop", exposeReasoning: true }))
      .toBe(HIDDEN_REASONING_CONTENT)
  })

  it.prop(
    "content is never empty",
    [fc.string(), fc.constantFrom("stop", "length", "tool_calls", ""), fc.boolean()],
    ([reasoning, finishReason, exposeReasoning]) => {
      expect(reasoningOnlyContent({ reasoning, finishReason, exposeReasoning }).trim()).not.toBe("")
    },
    { fastCheck: { numRuns: 1000 } }
  )
})
