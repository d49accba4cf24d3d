import { createOpenAI } from "@ai-sdk/openai"
import { describe, expect, it } from "@effect/vitest"
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai"
import * as Effect from "effect/Effect"
import { chunk, completionTokens, type Script, textStream, usageChunk } from "../../support/fakeUpstream.js"
import { upstreamMessages } from "../../support/toolsReasoning.js"
import { testEdge } from "./edge.js"

/**
 * The Vercel AI SDK's `openai.responses(model)` with its defaults (`store: true`): in a multi-step tool loop it
 * sends the earlier output back as `item_reference`s (the reasoning, the function call), which the edge resolves
 * from its store. Step 2 succeeds, and the upstream is given the step-1 reasoning back.
 */

const sse = (events: ReadonlyArray<object>): Script => ({ kind: "sse", events })

// (The AI SDK requires a response's usage: upstreams asked for it, as the edge asks, report it.)
const usage = completionTokens(20, 12, { reasoning: 8 })

const REASONING = "The user wants the weather in Oslo: call get_weather."

/** Step 1: reasoning and a tool call; step 2 (and any after): text. */
const upstream = (_: unknown, n: number): Script =>
  n === 0
    ? sse([
      chunk({ role: "assistant", content: "" }),
      chunk({ reasoning_content: "The user wants the weather in Oslo: " }),
      chunk({ reasoning_content: "call get_weather." }),
      chunk({ tool_calls: [{ index: 0, id: "call_w1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }] }),
      chunk({ finish_reason: "tool_calls" }),
      usageChunk(usage)
    ])
    : sse(textStream(["It is sunny ", "in Oslo."], { usage }))

const tools = {
  get_weather: tool({
    description: "Current weather in a city",
    inputSchema: jsonSchema<{ city: string }>({
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
      additionalProperties: false
    }),
    execute: async ({ city }) => ({ city, sky: "sunny" })
  })
}

/** The AI SDK's provider on the edge, recording the request bodies it sends. */
const provider = (url: string) => {
  const sent: Array<{ input?: ReadonlyArray<{ type?: string; id?: string }>; store?: unknown }> = []
  const recording: typeof fetch = (input, init) => {
    if (typeof init?.body === "string") sent.push(JSON.parse(init.body))
    return fetch(input, init)
  }
  return { openai: createOpenAI({ baseURL: `${url}/v1`, apiKey: "client-key", fetch: recording }), sent }
}

/** What step 2 must have looked like, at the SDK and at the upstream. */
const expectStepTwo = (
  sent: ReturnType<typeof provider>["sent"],
  upstreamBodies: ReadonlyArray<Record<string, unknown>>
) => {
  expect(sent).toHaveLength(2)
  // The defaults: nothing says `store: false`, and the earlier output goes back by reference.
  expect(sent[1]?.store).toBeUndefined()
  const references = (sent[1]?.input ?? []).filter((i) => i.type === "item_reference").map((i) => i.id)
  expect(references).toEqual([expect.stringMatching(/^rs_/), expect.stringMatching(/^fc_/)])
  expect(upstreamBodies).toHaveLength(2)
  expect(upstreamMessages(upstreamBodies[1])).toEqual([
    { role: "user", content: "What is the weather in Oslo?" },
    {
      role: "assistant",
      content: null,
      reasoning_content: REASONING,
      tool_calls: [{ id: "call_w1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }]
    },
    { role: "tool", tool_call_id: "call_w1", content: JSON.stringify({ city: "Oslo", sky: "sunny" }) }
  ])
}

describe("Vercel AI SDK openai.responses(model), its defaults, a multi-step tool loop", () => {
  it.scopedLive("generateText: step 2 succeeds, and the upstream is given the step-1 reasoning back", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(upstream)
      const { openai, sent } = provider(edge.url)
      const result = yield* Effect.promise(() =>
        generateText({ model: openai.responses("model"), prompt: "What is the weather in Oslo?", tools, stopWhen: stepCountIs(3) })
      )
      expect(result.steps).toHaveLength(2)
      expect(result.steps[0]?.reasoningText).toBe(REASONING)
      expect(result.steps[0]?.toolCalls.map((c) => c.toolName)).toEqual(["get_weather"])
      expect(result.text).toBe("It is sunny in Oslo.")
      expect(result.finishReason).toBe("stop")
      expectStepTwo(sent, edge.upstreamBodies())
    }))

  it.scopedLive("streamText: step 2 succeeds, and the upstream is given the step-1 reasoning back", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(upstream)
      const { openai, sent } = provider(edge.url)
      const result = streamText({ model: openai.responses("model"), prompt: "What is the weather in Oslo?", tools, stopWhen: stepCountIs(3) })
      const errors: Array<unknown> = []
      const parts = yield* Effect.promise(async () => {
        const types: Array<string> = []
        for await (const part of result.fullStream) {
          types.push(part.type)
          if (part.type === "error" || part.type === "tool-error") errors.push(part)
        }
        return types
      })
      expect(errors).toEqual([])
      expect(parts.filter((t) => t === "finish-step")).toHaveLength(2)
      expect(yield* Effect.promise(() => result.text)).toBe("It is sunny in Oslo.")
      expect((yield* Effect.promise(() => result.steps))[0]?.reasoningText).toBe(REASONING)
      expectStepTwo(sent, edge.upstreamBodies())
    }))
})
