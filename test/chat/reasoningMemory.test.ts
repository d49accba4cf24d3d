import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { contentKey, makeReasoningMemory } from "../../src/chat/reasoningMemory.js"
import type { ChatMessage } from "../../src/protocol/SubmitRunRequest.js"

const limits = { maxTurns: 100, maxChars: 100_000 }
const answered = (reasoning: string, toolCallIds: ReadonlyArray<string> = [], contentPreview = "") => ({
  reasoning,
  toolCallIds,
  contentPreview
})
const assistant = (fields: Partial<ChatMessage>): ChatMessage => ({ role: "assistant", ...fields })
const call = (id: string) => ({ id, type: "function" as const, function: { name: "f", arguments: "{}" } })

describe("reasoning memory", () => {
  it("puts a turn's reasoning back by its tool-call id, and says so", () => {
    const memory = makeReasoningMemory(limits)
    memory.remember("m", answered("think", ["call_1"]))
    const messages = [{ role: "user" as const, content: "hi" }, assistant({ tool_calls: [call("call_1")] })]
    const restored = memory.restore("m", messages)
    expect(restored.matches).toEqual(["tool_call"])
    expect(restored.messages[1]?.reasoning_content).toBe("think")
    expect(restored.messages[0]).toBe(messages[0])
    expect(messages[1]?.reasoning_content).toBeUndefined()
  })

  it("matches a turn's text however the client trimmed and re-wrapped it", () => {
    const memory = makeReasoningMemory(limits)
    memory.remember("m", answered("why", [], "\n\nThe answer is\n42.  \n"))
    const restored = memory.restore("m", [assistant({ content: [{ type: "text", text: "The answer is 42." }] })])
    expect(restored.matches).toEqual(["content"])
    expect(restored.messages[0]?.reasoning_content).toBe("why")
  })

  it("leaves a turn that carries reasoning alone, and counts a turn it has nothing for as a miss", () => {
    const memory = makeReasoningMemory(limits)
    memory.remember("m", answered("mine", ["a"]))
    const messages = [assistant({ tool_calls: [call("a")], reasoning_content: "theirs" }), assistant({ content: "other" })]
    const restored = memory.restore("m", messages)
    expect(restored.matches).toEqual(["miss"])
    expect(restored.messages).toBe(messages)
  })

  it("keeps partitions apart: another model's or caller's turn with the same id or text gets nothing", () => {
    const memory = makeReasoningMemory(limits)
    memory.remember("m\u0000key-a", answered("secret", ["id"], "same text"))
    const restored = memory.restore("m\u0000key-b", [assistant({ tool_calls: [call("id")] }), assistant({ content: "same text" })])
    expect(restored.matches).toEqual(["miss", "miss"])
  })

  it("remembers nothing for an answer without reasoning, or without a call or text to find it by", () => {
    const memory = makeReasoningMemory(limits)
    memory.remember("m", answered("", ["a"], "text"))
    memory.remember("m", answered("r", [], "  \n "))
    expect(memory.size()).toEqual({ turns: 0, chars: 0 })
  })

  it("drops the least recently used turn past maxTurns; a turn put back counts as used", () => {
    const memory = makeReasoningMemory({ maxTurns: 2, maxChars: 1000 })
    memory.remember("m", answered("one", ["1"]))
    memory.remember("m", answered("two", ["2"]))
    memory.restore("m", [assistant({ tool_calls: [call("1")] })])
    memory.remember("m", answered("three", ["3"]))
    const restored = memory.restore("m", [1, 2, 3].map((n) => assistant({ tool_calls: [call(String(n))] })))
    expect(restored.matches).toEqual(["tool_call", "miss", "tool_call"])
    expect(memory.size()).toEqual({ turns: 2, chars: "one".length + "three".length })
  })

  it("never holds more than its limits, whatever is remembered (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 40 }),
        fc.array(fc.tuple(fc.string({ maxLength: 15 }), fc.array(fc.constantFrom("a", "b", "c", "d"), { maxLength: 2 }), fc.constantFrom("", "x", "y")), { maxLength: 30 }),
        (maxTurns, maxChars, answers) => {
          const memory = makeReasoningMemory({ maxTurns, maxChars })
          for (const [reasoning, ids, text] of answers) {
            memory.remember("m", answered(reasoning, ids, text))
            const size = memory.size()
            expect(size.turns).toBeLessThanOrEqual(maxTurns)
            expect(size.chars).toBeLessThanOrEqual(maxChars)
          }
        }
      )
    )
  })

  it("the latest answer under a key wins, and what it replaced no longer counts (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string({ minLength: 1, maxLength: 8 }), fc.constantFrom("a", "b", "c")), { minLength: 1, maxLength: 20 }), (answers) => {
        const memory = makeReasoningMemory({ maxTurns: 100, maxChars: 10_000 })
        const latest = new Map<string, string>()
        for (const [reasoning, id] of answers) {
          memory.remember("m", answered(reasoning, [id]))
          latest.set(id, reasoning)
        }
        for (const [id, reasoning] of latest) {
          expect(memory.restore("m", [assistant({ tool_calls: [call(id)] })]).messages[0]?.reasoning_content).toBe(reasoning)
        }
        expect(memory.size().turns).toBe(latest.size)
      })
    )
  })

  it("contentKey: the start of the text, leading whitespace aside, whitespace runs as one", () => {
    expect(contentKey("  a\n\n b  ")).toBe("a b")
    expect(contentKey(" \n")).toBeUndefined()
    expect(contentKey("x".repeat(2000))).toHaveLength(800)
  })
})
