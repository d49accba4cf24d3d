import { describe, expect, it } from "@effect/vitest"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import { fromCompletion } from "../../../src/providers/openai/fromCompletion.js"
import * as Mapper from "../../../src/providers/openai/toRunEvents.js"
import { decodeEvent } from "../../../src/providers/openai/upstreamWire.js"

const initial = Mapper.initial({ upstreamModel: "configured" })

const completion = (message: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    id: "chatcmpl-1",
    object: "chat.completion",
    model: "up-model",
    choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: "stop", ...extra }],
    usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 }
  })

/** The events the same answer gives when streamed as one chunk per field, then `[DONE]`. */
const streamed = (chunks: ReadonlyArray<unknown>): ReadonlyArray<RunEvent.RunEvent> => {
  let state = initial
  const out: Array<RunEvent.RunEvent> = []
  for (const data of [...chunks.map((c) => JSON.stringify(c)), "[DONE]"]) {
    const [next, events] = Mapper.feed(state, decodeEvent(undefined, data))
    state = next
    out.push(...events)
  }
  return out
}

describe("fromCompletion: a whole answer → the run's events", () => {
  it("content, usage, finish reason and the upstream's model, as the stream would give them", () => {
    const events = fromCompletion(initial, completion({ content: "Hello world" }))
    expect(events).toEqual([
      RunEvent.delta("Hello world"),
      RunEvent.complete({
        finishReason: "stop",
        toolCalls: [],
        usage: { inputTokens: 5, outputTokens: 3 },
        metadata: { upstream_model: "up-model" }
      })
    ])
    expect(events).toEqual(streamed([
      { model: "up-model", choices: [{ index: 0, delta: { role: "assistant", content: "Hello world" }, finish_reason: "stop" }] },
      { choices: [], usage: { prompt_tokens: 5, completion_tokens: 3 } }
    ]))
  })

  it("reasoning (reasoning_content or reasoning) before the content", () => {
    expect(fromCompletion(initial, completion({ reasoning_content: "think", content: "ok" })).slice(0, 2)).toEqual([
      RunEvent.reasoningDelta("think"),
      RunEvent.delta("ok")
    ])
    expect(fromCompletion(initial, completion({ reasoning: "hmm", content: null })).slice(0, 1)).toEqual([
      RunEvent.reasoningDelta("hmm")
    ])
  })

  it("native tool calls, each whole, in order; two without ids stay two; an object's arguments as JSON text", () => {
    const events = fromCompletion(
      initial,
      completion({
        content: null,
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "a", arguments: "{\"x\":1}" } },
          { type: "function", function: { name: "b", arguments: { y: 2 } } },
          { type: "function", function: { name: "c", arguments: "{}" } }
        ]
      }, { finish_reason: "tool_calls" })
    )
    expect(events).toHaveLength(1)
    expect(events[0]).toMatchObject({
      _tag: "Complete",
      finishReason: "tool_calls",
      toolCalls: [
        { id: "call_1", name: "a", arguments: "{\"x\":1}" },
        { name: "b", arguments: "{\"y\":2}" },
        { name: "c", arguments: "{}" }
      ]
    })
  })

  it("logprobs laid over the whole content, with their top alternatives", () => {
    const logprobs = {
      content: [
        { token: "Hi", logprob: -0.1, bytes: [72, 105], top_logprobs: [{ token: "Hi", logprob: -0.1 }] },
        { token: "!", logprob: -0.5, bytes: [33], top_logprobs: [] }
      ]
    }
    const [delta] = fromCompletion(initial, completion({ content: "Hi!" }, { logprobs }))
    expect(delta).toEqual({
      _tag: "Delta",
      text: "Hi!",
      logprobs: [
        { token: "Hi", logprob: -0.1, bytes: [72, 105], topLogprobs: [{ token: "Hi", logprob: -0.1 }] },
        { token: "!", logprob: -0.5, bytes: [33], topLogprobs: [] }
      ]
    })
  })

  it("usage with cached and reasoning tokens; the configured model when the upstream names none", () => {
    const body = JSON.stringify({
      choices: [{ message: { content: "x" }, finish_reason: "length" }],
      usage: {
        prompt_tokens: 10,
        completion_tokens: 4,
        prompt_tokens_details: { cached_tokens: 6 },
        completion_tokens_details: { reasoning_tokens: 2 }
      }
    })
    expect(fromCompletion(initial, body).at(-1)).toEqual(RunEvent.complete({
      finishReason: "length",
      toolCalls: [],
      usage: { inputTokens: 10, outputTokens: 4, reasoningTokens: 2, cachedInputTokens: 6 },
      metadata: { upstream_model: "configured" }
    }))
  })

  it("text mode: the whole text is one delta, marked for the session's tool parsing", () => {
    const text = Mapper.initial({ toolMode: "text" })
    const events = fromCompletion(text, completion({ content: "<tool_call>\n{\"name\":\"a\",\"arguments\":{}}\n</tool_call>" }))
    expect(events[0]).toEqual(RunEvent.delta("<tool_call>\n{\"name\":\"a\",\"arguments\":{}}\n</tool_call>"))
    expect(events[1]).toMatchObject({ _tag: "Complete", metadata: { tool_mode: "text" } })
  })

  it("an error in a 200, a body that is not JSON, a malformed answer: one Failed event", () => {
    expect(fromCompletion(initial, JSON.stringify({ error: { message: "model overloaded" } }))).toEqual([
      RunEvent.failed("upstream error: model overloaded")
    ])
    const notJson = fromCompletion(initial, "<html>bad gateway</html>")
    expect(notJson).toEqual([RunEvent.failed("upstream sent an answer that is not JSON: <html>bad gateway</html>")])
    const malformed = fromCompletion(initial, JSON.stringify({ choices: [{ message: { content: 7 } }] }))
    expect(malformed).toHaveLength(1)
    expect(malformed[0]).toMatchObject({ _tag: "Failed", message: expect.stringContaining("choices.0.message.content") })
    expect(fromCompletion(initial, "[1]")).toEqual([RunEvent.failed("upstream sent a malformed answer (expected an object)")])
  })

  it("no choices: a clean end with nothing said (as a stream of only [DONE])", () => {
    expect(fromCompletion(initial, JSON.stringify({ choices: [] }))).toEqual(streamed([]))
  })
})
