import { createOpenAICompatible } from "@ai-sdk/openai-compatible"
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectDoneOnce, postJson, readSse, type SseResult } from "../support/e2e.js"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { FAKE_MODEL } from "../support/fakeUpstream.js"
import { type ScenarioUpstream, startScenarioUpstream } from "../support/scenarios.js"
import {
  awkwardSplits,
  collect,
  COMPLETION_TOOL,
  containsDeep,
  contentStream,
  cutsAround,
  expectNoMarkup,
  jsonObjectsIn,
  messageText,
  parsedCalls,
  splitBySizes,
  type StreamSummary,
  summarise,
  THERMOSTAT_TOOL,
  upstreamMessages,
  WEATHER_PARAMETERS,
  WEATHER_TOOL,
  type WireChunk,
  xmlCall
} from "../support/toolsReasoning.js"

/**
 * Tool calls end to end: model text with tool-call markup (split at awkward
 * places by a fake upstream) becomes real `tool_calls`; strict validation and
 * retries; `tools: "text"` mode; the Vercel AI SDK as a client.
 */

const PARIS = { city: "Paris" }

interface SseOutcome {
  readonly sse: SseResult
  readonly summary: StreamSummary
  readonly errors: ReadonlyArray<{ readonly type: string; readonly message: string }>
}

/** The JSON events of a raw SSE response, split into chunks and error events. */
const outcomeOf = (sse: SseResult): SseOutcome => {
  const errors = sse.events.filter((e) => e.error !== undefined).map((e) => e.error as SseOutcome["errors"][number])
  const chunks = sse.events.filter((e) => e.error === undefined) as ReadonlyArray<WireChunk>
  return { sse, summary: summarise(chunks), errors }
}

describe("tool calls through a fake upstream that writes them as text", () => {
  let upstream: ScenarioUpstream
  let edge: EdgeProcess
  let client: OpenAI

  beforeAll(async () => {
    upstream = await startScenarioUpstream()
    const provider = { type: "openai", baseUrl: upstream.url, model: FAKE_MODEL }
    edge = await startEdge({
      config: {
        runs: { toolValidationAttempts: 2 },
        models: [
          { id: "tc", provider, tools: "native" },
          { id: "tc-strict", provider, output: { strict: true } },
          { id: "tc-strict-buffer", provider, output: { strict: true, streamBuffer: true } },
          { id: "tc-agent", provider, output: { strict: true, xmlCompletionTool: "attempt_completion" } },
          { id: "tc-text", provider, tools: "text" }
        ]
      }
    })
    client = new OpenAI({ baseURL: edge.baseURL, apiKey: "x", maxRetries: 0 })
  })
  afterAll(async () => {
    await edge?.stop()
    await upstream?.close()
  })

  const streamed = (model: string, key: string, tools: ReadonlyArray<OpenAI.ChatCompletionTool> = [WEATHER_TOOL]) =>
    client.chat.completions
      .create({
        model,
        stream: true,
        messages: [{ role: "user", content: key }],
        ...(tools.length > 0 ? { tools: [...tools] } : {})
      })
      .then(collect)

  const rawStream = async (model: string, key: string, tools: ReadonlyArray<object> = [WEATHER_TOOL]) => {
    const response = await postJson(`${edge.baseURL}/chat/completions`, {
      model,
      stream: true,
      messages: [{ role: "user", content: key }],
      tools
    })
    expect(response.status).toBe(200)
    const sse = await readSse(response)
    expectDoneOnce(sse)
    return outcomeOf(sse)
  }

  /** Runs `run` once per awkward splitting of `text` (each its own scenario), concurrently; each result with a label. */
  const streamSplits = <R>(name: string, text: string, run: (key: string) => Promise<R>) =>
    Promise.all(
      awkwardSplits(text).map(async (split, i) => {
        const key = upstream.script(`${name} ${i}`, { kind: "sse", events: contentStream(split.pieces) })
        return { label: `${JSON.stringify(text)} split ${split.name}`, result: await run(key) }
      })
    )

  describe("text markup becomes tool_calls", () => {
    const BEFORE = "Let me check the weather for you.\n"
    const TEXT = BEFORE + xmlCall("get_weather", PARIS)

    it("an XML <tool_call> split mid-tag across many deltas becomes one tool_calls chunk and finish tool_calls; the text before it arrives as content exactly once and no markup reaches content", async () => {
      for (const { label, result: s } of await streamSplits("xml split", TEXT, (key) => streamed("tc", key))) {
        expect(s.content, label).toBe(BEFORE)
        expectNoMarkup(s, undefined, label)
        expect(s.toolCallChunks, label).toHaveLength(1)
        const calls = parsedCalls(s)
        expect(calls, label).toEqual([
          { index: 0, id: expect.stringMatching(/^call_/), type: "function", name: "get_weather", arguments: PARIS }
        ])
        expect(s.finishReasons, label).toEqual(["tool_calls"])
        // The tool calls come before the finish chunk, which is last and empty.
        const last = s.chunks[s.chunks.length - 1]!
        expect(last.choices[0]?.finish_reason).toBe("tool_calls")
        expect(last.choices[0]?.delta).toEqual({})
        expect(s.chunks.indexOf(s.toolCallChunks[0]!)).toBeLessThan(s.chunks.length - 1)
      }
    })

    it("every two-way cut in or around the tags and the JSON's start yields the same content and call", async () => {
      const cuts = cutsAround(TEXT, ["<tool_call>", "</tool_call>", "{\"name\":", "}}"])
      const results = await Promise.all(
        cuts.map(async (pieces, i) => {
          const key = upstream.script(`xml cut ${i}`, { kind: "sse", events: contentStream(pieces) })
          return { pieces, s: await streamed("tc", key) }
        })
      )
      for (const { pieces, s } of results) {
        const label = JSON.stringify(pieces)
        expect(s.content, label).toBe(BEFORE)
        expectNoMarkup(s, undefined, label)
        expect(parsedCalls(s).map((c) => [c.name, c.arguments]), label).toEqual([["get_weather", PARIS]])
        expect(s.finishReasons, label).toEqual(["tool_calls"])
      }
    })

    it("text before and after a call arrives as content, in order, exactly once", async () => {
      const text = `Before.\n${xmlCall("get_weather", PARIS)}\nAfter the call.`
      for (const { label, result: s } of await streamSplits("around", text, (key) => streamed("tc", key))) {
        expect(s.content, label).toBe("Before.\n\nAfter the call.")
        expectNoMarkup(s, undefined, label)
        expect(parsedCalls(s).map((c) => [c.name, c.arguments]), label).toEqual([["get_weather", PARIS]])
        expect(s.finishReasons, label).toEqual(["tool_calls"])
      }
    })

    it("XML tags in any case, with whitespace around the JSON and arguments as a JSON string, still make a call", async () => {
      const text = "<TOOL_CALL>\n  {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}  \n</Tool_Call>"
      const key = upstream.script("xml case", { kind: "sse", events: contentStream(splitBySizes(text, [3, 1])) })
      const s = await streamed("tc", key)
      expect(s.content).toBe("")
      expectNoMarkup(s, ["<TOOL", "<Tool", "TOOL_CALL", "Tool_Call", "{\"name\""])
      expect(parsedCalls(s).map((c) => [c.name, c.arguments])).toEqual([["get_weather", PARIS]])
    })

    it("a leading <think> block before a <tool_call> goes to reasoning, and the call is a tool call", async () => {
      const text = `<think>I need the weather tool.</think>\n${xmlCall("get_weather", PARIS)}`
      const key = upstream.script("think then call", { kind: "sse", events: contentStream(splitBySizes(text, [2, 5])) })
      const s = await streamed("tc", key)
      expect(s.reasoningContent).toBe("I need the weather tool.")
      expect(s.content).toBe("")
      expect(parsedCalls(s).map((c) => [c.name, c.arguments])).toEqual([["get_weather", PARIS]])
      expect(s.finishReasons).toEqual(["tool_calls"])
    })

    it("non-stream: the XML call is message.tool_calls, the text before it is message.content, finish tool_calls", async () => {
      const key = upstream.script("xml json", { kind: "sse", events: contentStream(splitBySizes(TEXT, [3, 1, 4])) })
      const completion = await client.chat.completions.create({
        model: "tc",
        messages: [{ role: "user", content: key }],
        tools: [WEATHER_TOOL]
      })
      const choice = completion.choices[0]!
      expect(choice.finish_reason).toBe("tool_calls")
      expect(choice.message.content).toBe(BEFORE)
      const calls = choice.message.tool_calls ?? []
      expect(calls).toHaveLength(1)
      const call = calls[0]!
      expect(call.type).toBe("function")
      expect(call.id).toMatch(/^call_/)
      if (call.type !== "function") throw new Error("not a function call")
      expect(call.function.name).toBe("get_weather")
      expect(JSON.parse(call.function.arguments)).toEqual(PARIS)
    })

    it("two <tool_call> blocks become two calls with indexes 0 and 1, in order, in one chunk", async () => {
      const text = `${xmlCall("get_weather", PARIS)}\n${xmlCall("get_weather", { city: "Rome", unit: "c" })}`
      const key = upstream.script("xml two", { kind: "sse", events: contentStream(splitBySizes(text, [2, 5, 1])) })
      const s = await streamed("tc", key)
      expect(s.content).toBe("")
      expect(s.toolCallChunks).toHaveLength(1)
      const calls = parsedCalls(s)
      expect(calls.map((c) => c.index)).toEqual([0, 1])
      expect(calls.map((c) => [c.name, c.arguments])).toEqual([
        ["get_weather", PARIS],
        ["get_weather", { city: "Rome", unit: "c" }]
      ])
      expect(new Set(calls.map((c) => c.id)).size).toBe(2)
      expect(s.finishReasons).toEqual(["tool_calls"])

      const completion = await client.chat.completions.create({
        model: "tc",
        messages: [{ role: "user", content: key }],
        tools: [WEATHER_TOOL]
      })
      const names = (completion.choices[0]!.message.tool_calls ?? []).map((c) =>
        c.type === "function" ? JSON.parse(c.function.arguments) : undefined
      )
      expect(names).toEqual([PARIS, { city: "Rome", unit: "c" }])
    })

    it("the mustache form {{tool_call}}…{{/tool_call}} split across deltas becomes a call", async () => {
      const before = "Checking. "
      const text = `${before}{{tool_call}}{"name": "get_weather", "arguments": {"city": "Paris"}}{{/tool_call}}`
      for (const { label, result: s } of await streamSplits("mustache", text, (key) => streamed("tc", key))) {
        expect(s.content, label).toBe(before)
        expectNoMarkup(s, undefined, label)
        expect(parsedCalls(s).map((c) => [c.index, c.name, c.arguments]), label).toEqual([[0, "get_weather", PARIS]])
        expect(s.finishReasons, label).toEqual(["tool_calls"])
      }
    })

    it("the Qwen3-Coder form <function=…><parameter=…> becomes a call whose values are typed by the tool's schema", async () => {
      const text = "<tool_call>\n<function=set_temperature>\n<parameter=room>\nkitchen\n</parameter>\n" +
        "<parameter=degrees>\n21.5\n</parameter>\n<parameter=label>\n007\n</parameter>\n</function>\n</tool_call>"
      for (const { label, result: s } of await streamSplits("qwen3", text, (key) => streamed("tc", key, [WEATHER_TOOL, THERMOSTAT_TOOL]))) {
        expect(s.content, label).toBe("")
        expectNoMarkup(s, undefined, label)
        const calls = parsedCalls(s)
        expect(calls.map((c) => c.name), label).toEqual(["set_temperature"])
        // degrees is a number by the schema, label a string even though it looks like one.
        expect(calls[0]?.arguments, label).toStrictEqual({ room: "kitchen", degrees: 21.5, label: "007" })
        expect(s.finishReasons, label).toEqual(["tool_calls"])
      }
    })

    it("the Mistral form [TOOL_CALLS][…] becomes the calls it lists", async () => {
      const before = "On it."
      const text = `${before}[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, ` +
        `{"name": "get_weather", "arguments": {"city": "Oslo"}}]`
      for (const { label, result: s } of await streamSplits("mistral", text, (key) => streamed("tc", key))) {
        expect(s.content, label).toBe(before)
        expectNoMarkup(s, ["[TOOL_CALLS", "TOOL_CALLS", "{\"name\"", "[{", "arguments"], label)
        expect(parsedCalls(s).map((c) => [c.index, c.name, c.arguments]), label).toEqual([
          [0, "get_weather", PARIS],
          [1, "get_weather", { city: "Oslo" }]
        ])
        expect(s.finishReasons, label).toEqual(["tool_calls"])
      }
    })

    it("a last block without its close tag but with complete JSON is a call", async () => {
      const text = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      const key = upstream.script("unclosed", { kind: "sse", events: contentStream(splitBySizes(text, [4, 1, 6])) })
      const s = await streamed("tc", key)
      expect(s.content).toBe("Sure.\n")
      expectNoMarkup(s)
      expect(parsedCalls(s).map((c) => [c.name, c.arguments])).toEqual([["get_weather", PARIS]])
      expect(s.finishReasons).toEqual(["tool_calls"])

      const completion = await client.chat.completions.create({
        model: "tc",
        messages: [{ role: "user", content: key }],
        tools: [WEATHER_TOOL]
      })
      expect(completion.choices[0]!.finish_reason).toBe("tool_calls")
      expect(completion.choices[0]!.message.tool_calls).toHaveLength(1)
    })

    it("text that only resembles markup (<tools>, a lone {{, a trailing <tool) is released as content, in order, exactly once", async () => {
      const texts = [
        "Use <tools> wisely; {{ braces }} stay; <tool-ish> too; last {{",
        "Ends with a near miss <tool",
        "{{ not json at all }} and {{tool_calls are mentioned}}"
      ]
      const runs = await Promise.all(
        texts.map((text, t) => streamSplits(`near miss ${t}`, text, (key) => streamed("tc", key)).then((r) => ({ text, r })))
      )
      for (const { text, r } of runs) {
        for (const { label, result: s } of r) {
          expect(s.content, label).toBe(text)
          expect(s.toolCalls, label).toEqual([])
          expect(s.finishReasons, label).toEqual(["stop"])
        }
      }
    })

    it("without request tools, tool-call markup is plain content", async () => {
      const key = upstream.script("no tools", { kind: "sse", events: contentStream(splitBySizes(TEXT, [3])) })
      const s = await streamed("tc", key, [])
      expect(s.content).toBe(TEXT)
      expect(s.toolCalls).toEqual([])
      expect(s.finishReasons).toEqual(["stop"])

      const completion = await client.chat.completions.create({ model: "tc", messages: [{ role: "user", content: key }] })
      expect(completion.choices[0]!.message.content).toBe(TEXT)
      expect(completion.choices[0]!.message.tool_calls ?? []).toEqual([])
      expect(completion.choices[0]!.finish_reason).toBe("stop")
    })

    it("markup that opens but does not parse (broken JSON, no name, cut off) ends the stream with one SSE tool_validation_error event and no markup in content", async () => {
      const before = "Let me look. "
      const bodies = [
        `<tool_call>{"name": "get_weather", "arguments": {"city": "Par</tool_call>`,
        `<tool_call>{"arguments": {"city": "Paris"}}</tool_call>`,
        `{{tool_call}}{"name": "get_weather", "arguments": {"city": Paris}}{{/tool_call}}`,
        `<tool_call>{"name": "get_weather", "arguments": {"city": "Par`
      ]
      const runs = await Promise.all(bodies.map((body, b) => streamSplits(`broken ${b}`, before + body, (key) => rawStream("tc", key))))
      for (const r of runs) {
        for (const { label, result: { errors, summary: s } } of r) {
          expect(errors.map((e) => e.type), label).toEqual(["tool_validation_error"])
          expect(s.finishReasons, label).toEqual([])
          expect(s.toolCalls, label).toEqual([])
          expectNoMarkup(s, ["<tool", "tool_call", "{{", "{\"name\"", "{\"arguments\"", "Par"], label)
          expect(before.startsWith(s.content), label).toBe(true)
        }
      }
    })

    it("non-stream: broken JSON inside markup is a 502 tool_validation_error", async () => {
      const text = "Hmm. <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": }}</tool_call>"
      const key = upstream.script("broken json", { kind: "sse", events: contentStream(splitBySizes(text, [5, 2])) })
      const response = await postJson(`${edge.baseURL}/chat/completions`, {
        model: "tc",
        messages: [{ role: "user", content: key }],
        tools: [WEATHER_TOOL]
      })
      expect(response.status).toBe(502)
      const body = (await response.json()) as { error: { type: string; message: string } }
      expect(body.error.type).toBe("tool_validation_error")
      expect(body.error.message).not.toBe("")
    })
  })

  describe("strict models validate calls and retry", () => {
    const INVALID = xmlCall("get_weather", { city: 42 })
    const VALID = xmlCall("get_weather", PARIS)

    it("non-stream: an invalid call (arguments fail the schema) is re-run; the valid second answer is returned with 200", async () => {
      const key = upstream.script("strict retry", (n) => ({
        kind: "sse",
        events: contentStream(splitBySizes(n === 0 ? INVALID : VALID, [7, 3]))
      }))
      const completion = await client.chat.completions.create({
        model: "tc-strict",
        messages: [{ role: "user", content: key }],
        tools: [WEATHER_TOOL]
      })
      expect(upstream.requestsFor(key)).toHaveLength(2)
      const choice = completion.choices[0]!
      expect(choice.finish_reason).toBe("tool_calls")
      const calls = choice.message.tool_calls ?? []
      expect(calls).toHaveLength(1)
      const call = calls[0]!
      if (call.type !== "function") throw new Error("not a function call")
      expect(call.function.name).toBe("get_weather")
      expect(JSON.parse(call.function.arguments)).toEqual(PARIS)
    })

    it("non-stream: markup that does not parse is re-run by a strict model; the valid second answer is returned", async () => {
      const key = upstream.script("strict malformed retry", (n) => ({
        kind: "sse",
        events: contentStream([n === 0 ? "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"ci</tool_call>" : VALID])
      }))
      const completion = await client.chat.completions.create({
        model: "tc-strict",
        messages: [{ role: "user", content: key }],
        tools: [WEATHER_TOOL]
      })
      expect(upstream.requestsFor(key)).toHaveLength(2)
      const call = completion.choices[0]!.message.tool_calls?.[0]
      if (call?.type !== "function") throw new Error("no function call")
      expect(JSON.parse(call.function.arguments)).toEqual(PARIS)
    })

    it("the retry's upstream request is an exact replay of the first (same messages, tools and parameters)", async () => {
      const key = upstream.script("strict replay", (n) => ({
        kind: "sse",
        events: contentStream([n === 0 ? INVALID : VALID])
      }))
      const response = await postJson(`${edge.baseURL}/chat/completions`, {
        model: "tc-strict",
        messages: [
          { role: "system", content: "You are terse." },
          { role: "user", content: "earlier question" },
          { role: "assistant", content: "earlier answer" },
          { role: "user", content: key }
        ],
        tools: [WEATHER_TOOL, THERMOSTAT_TOOL],
        tool_choice: "auto",
        parallel_tool_calls: false,
        temperature: 0.3,
        top_p: 0.9,
        max_tokens: 64,
        seed: 7,
        stop: ["\n\n\n"],
        metadata: { trace: "abc" }
      })
      expect(response.status).toBe(200)
      const requests = upstream.requestsFor(key)
      expect(requests).toHaveLength(2)
      expect(requests[1]!.body).toEqual(requests[0]!.body)
      const first = requests[0]!.body as Record<string, unknown>
      expect(first["temperature"]).toBe(0.3)
      expect(first["seed"]).toBe(7)
      expect(Array.isArray(first["tools"])).toBe(true)
    })

    it("non-stream: invalid twice with toolValidationAttempts 2 is a 502 tool_validation_error after exactly 2 upstream requests", async () => {
      const key = upstream.script("strict invalid twice", { kind: "sse", events: contentStream([INVALID]) })
      const response = await postJson(`${edge.baseURL}/chat/completions`, {
        model: "tc-strict",
        messages: [{ role: "user", content: key }],
        tools: [WEATHER_TOOL]
      })
      expect(response.status).toBe(502)
      const body = (await response.json()) as { error: { type: string } }
      expect(body.error.type).toBe("tool_validation_error")
      expect(upstream.requestsFor(key)).toHaveLength(2)
    })

    it("a call to a tool the request does not offer is invalid for a strict model and is re-run", async () => {
      const key = upstream.script("strict unknown tool", (n) => ({
        kind: "sse",
        events: contentStream([n === 0 ? xmlCall("delete_everything", PARIS) : VALID])
      }))
      const completion = await client.chat.completions.create({
        model: "tc-strict",
        messages: [{ role: "user", content: key }],
        tools: [WEATHER_TOOL]
      })
      expect(upstream.requestsFor(key)).toHaveLength(2)
      const call = completion.choices[0]!.message.tool_calls?.[0]
      if (call?.type !== "function") throw new Error("no function call")
      expect(call.function.name).toBe("get_weather")
    })

    it("streamBuffer: a retried stream shows only the valid attempt — no invalid call and no content from the failed attempt", async () => {
      const key = upstream.script("strict buffer", (n) => ({
        kind: "sse",
        events: contentStream(
          splitBySizes(n === 0 ? `First try, failing. ${INVALID}` : `Second try. ${VALID}`, [4, 1, 3])
        )
      }))
      const { errors, sse, summary: s } = await rawStream("tc-strict-buffer", key)
      expect(upstream.requestsFor(key)).toHaveLength(2)
      expect(errors).toEqual([])
      expect(sse.raw).not.toContain("First try")
      // Nothing of the failed attempt's call (city 42) in any delta (ids and `created` may contain "42" by chance).
      const emitted = sse.events.map((e) => {
        const delta = e.choices?.[0]?.delta ?? {}
        return [delta.content, (delta.tool_calls ?? []).map((c: any) => c.function)]
      })
      expect(JSON.stringify(emitted)).not.toContain("42")
      expect(s.content).toBe("Second try. ")
      expect(s.toolCallChunks).toHaveLength(1)
      expect(parsedCalls(s).map((c) => [c.name, c.arguments])).toEqual([["get_weather", PARIS]])
      expect(s.finishReasons).toEqual(["tool_calls"])
    })

    it("streamBuffer: invalid on every attempt ends with tool_validation_error after exactly 2 upstream requests and never emits a call", async () => {
      const key = upstream.script("strict buffer twice", { kind: "sse", events: contentStream([`Attempt text. ${INVALID}`]) })
      const response = await postJson(`${edge.baseURL}/chat/completions`, {
        model: "tc-strict-buffer",
        stream: true,
        messages: [{ role: "user", content: key }],
        tools: [WEATHER_TOOL]
      })
      // Nothing was written before the outcome was known: an SSE error event, or the same error as HTTP 502.
      if (response.status === 502) {
        const body = (await response.json()) as { error: { type: string } }
        expect(body.error.type).toBe("tool_validation_error")
      } else {
        expect(response.status).toBe(200)
        const sse = await readSse(response)
        expectDoneOnce(sse)
        const { errors, summary: s } = outcomeOf(sse)
        expect(errors.map((e) => e.type)).toEqual(["tool_validation_error"])
        expect(s.toolCalls).toEqual([])
        expect(s.finishReasons).toEqual([])
        expect(s.content).toBe("")
        expectNoMarkup(s)
      }
      expect(upstream.requestsFor(key)).toHaveLength(2)
    })

    it("a live strict stream (no buffer) with an invalid call ends with SSE tool_validation_error and never emits the call", async () => {
      const key = upstream.script("strict live", { kind: "sse", events: contentStream(splitBySizes(INVALID, [3])) })
      const { errors, summary: s } = await rawStream("tc-strict", key)
      expect(errors.map((e) => e.type)).toEqual(["tool_validation_error"])
      expect(s.toolCalls).toEqual([])
      expect(s.finishReasons).toEqual([])
      expectNoMarkup(s)
      expect(upstream.requestsFor(key)).toHaveLength(1)
    })

    it("xmlCompletionTool: a strict text-only answer is wrapped into a call of attempt_completion whose result is the text", async () => {
      const answer = "The weather in Paris is sunny, 18 degrees."
      const key = upstream.script("completion tool", {
        kind: "sse",
        events: contentStream(splitBySizes(answer, [5, 2, 9]))
      })
      const tools = [WEATHER_TOOL, COMPLETION_TOOL]
      const completion = await client.chat.completions.create({
        model: "tc-agent",
        messages: [{ role: "user", content: key }],
        tools
      })
      const choice = completion.choices[0]!
      expect(choice.finish_reason).toBe("tool_calls")
      expect(choice.message.content ?? "").toBe("")
      const call = choice.message.tool_calls?.[0]
      if (call?.type !== "function") throw new Error("no function call")
      expect(call.function.name).toBe("attempt_completion")
      expect(JSON.parse(call.function.arguments)).toEqual({ result: answer })

      const s = await client.chat.completions
        .create({ model: "tc-agent", stream: true, messages: [{ role: "user", content: key }], tools })
        .then(collect)
      expect(s.content).toBe("")
      expect(parsedCalls(s).map((c) => [c.name, c.arguments])).toEqual([["attempt_completion", { result: answer }]])
      expect(s.finishReasons).toEqual(["tool_calls"])
    })
  })

  describe("tools: \"text\" mode", () => {
    it("the upstream request has no tools field; its system prompt names the tool and carries its JSON Schema", async () => {
      const key = upstream.script("text mode prompt", { kind: "sse", events: contentStream(["Fine."]) })
      const completion = await client.chat.completions.create({
        model: "tc-text",
        messages: [
          { role: "system", content: "You are a weather bot." },
          { role: "user", content: key }
        ],
        tools: [WEATHER_TOOL],
        tool_choice: "auto"
      })
      expect(completion.choices[0]!.message.content).toBe("Fine.")
      const body = upstream.requestsFor(key)[0]!.body as Record<string, unknown>
      expect(body).not.toHaveProperty("tools")
      expect(body).not.toHaveProperty("tool_choice")
      const messages = upstreamMessages(body)
      const system = messages.filter((m) => m.role === "system").map((m) => messageText(m.content)).join("\n")
      expect(system).toContain("You are a weather bot.")
      expect(system).toContain("get_weather")
      expect(jsonObjectsIn(system).some((o) => containsDeep(o, WEATHER_PARAMETERS))).toBe(true)
    })

    it("history assistant.tool_calls and tool messages are rendered as text upstream", async () => {
      const key = upstream.script("text mode history", { kind: "sse", events: contentStream(["It is 18 C."]) })
      await client.chat.completions.create({
        model: "tc-text",
        messages: [
          { role: "user", content: "What is the weather in Paris?" },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "call_hist1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }
            ]
          },
          { role: "tool", tool_call_id: "call_hist1", content: "18 C and sunny" },
          { role: "user", content: key }
        ],
        tools: [WEATHER_TOOL]
      })
      const messages = upstreamMessages(upstream.requestsFor(key)[0]!.body)
      expect(messages.some((m) => m.role === "tool")).toBe(false)
      expect(messages.some((m) => m.tool_calls !== undefined)).toBe(false)
      expect(messages.some((m) => m.tool_call_id !== undefined)).toBe(false)
      const assistant = messages.filter((m) => m.role === "assistant").map((m) => messageText(m.content)).join("\n")
      expect(assistant).toContain("get_weather")
      expect(jsonObjectsIn(assistant).some((o) => containsDeep(o, PARIS))).toBe(true)
      const rest = messages.filter((m) => m.role !== "system" && m.role !== "assistant").map((m) => messageText(m.content))
      expect(rest.some((t) => t.includes("18 C and sunny"))).toBe(true)
      // The order is kept: question, call, result, then the new question.
      const texts = messages.map((m) => (m.role === "system" ? "" : messageText(m.content)))
      const at = (needle: string) => texts.findIndex((t) => t.includes(needle))
      expect(at("What is the weather in Paris?")).toBeGreaterThanOrEqual(0)
      expect(at("What is the weather in Paris?")).toBeLessThan(at("get_weather"))
      expect(at("get_weather")).toBeLessThan(at("18 C and sunny"))
      expect(at("18 C and sunny")).toBeLessThan(at(key))
      expect(at(key)).toBe(texts.length - 1)
    })

    it("the model's text <tool_call> comes back as a real tool call", async () => {
      const text = `I'll check.\n${xmlCall("get_weather", PARIS)}`
      const key = upstream.script("text mode call", { kind: "sse", events: contentStream(splitBySizes(text, [2, 3])) })
      const s = await streamed("tc-text", key)
      expect(s.content).toBe("I'll check.\n")
      expectNoMarkup(s)
      expect(parsedCalls(s).map((c) => [c.index, c.type, c.name, c.arguments])).toEqual([
        [0, "function", "get_weather", PARIS]
      ])
      expect(s.finishReasons).toEqual(["tool_calls"])
    })
  })

  describe("Vercel AI SDK client", () => {
    const TEXT = `Looking it up.\n${xmlCall("get_weather", PARIS)}`
    const provider = () => createOpenAICompatible({ name: "iop", baseURL: edge.baseURL, apiKey: "x" })
    const tools = {
      get_weather: tool({
        description: "Current weather in a city",
        inputSchema: jsonSchema<{ city: string; unit?: "c" | "f" }>({
          type: "object",
          properties: { city: { type: "string" }, unit: { type: "string", enum: ["c", "f"] } },
          required: ["city"],
          additionalProperties: false
        }),
        // Runs in the client once the SDK has the parsed call (stepCountIs(1): no second model call).
        execute: async ({ city }) => ({ city, temperatureC: 18 })
      })
    }

    it("streamText yields the tool call with its toolName and parsed input, and no markup in the text", async () => {
      const key = upstream.script("ai sdk stream", { kind: "sse", events: contentStream(splitBySizes(TEXT, [1, 3, 2])) })
      const result = streamText({ model: provider()("tc"), prompt: key, tools, stopWhen: stepCountIs(1) })
      const calls: Array<{ toolName: string; input: unknown; invalid: boolean | undefined }> = []
      let text = ""
      const errors: Array<unknown> = []
      const results: Array<unknown> = []
      for await (const part of result.fullStream) {
        if (part.type === "tool-call") calls.push({ toolName: part.toolName, input: part.input, invalid: part.invalid })
        else if (part.type === "tool-result") results.push(part.output)
        else if (part.type === "text-delta") {
          expect(part.text).not.toMatch(/<tool|tool_call|\{"name"/)
          text += part.text
        } else if (part.type === "error" || part.type === "tool-error") errors.push(part)
      }
      expect(errors).toEqual([])
      expect(calls).toEqual([{ toolName: "get_weather", input: PARIS, invalid: undefined }])
      expect(results).toEqual([{ city: "Paris", temperatureC: 18 }])
      expect(text).toBe("Looking it up.\n")
      expect(await result.finishReason).toBe("tool-calls")
      expect(upstream.requestsFor(key)).toHaveLength(1)
      const body = upstream.requestsFor(key)[0]!.body as { tools?: ReadonlyArray<{ function: { name: string } }> }
      expect(body.tools?.map((t) => t.function.name)).toEqual(["get_weather"])
    })

    it("generateText returns the tool call with its toolName and parsed input, and no markup in the text", async () => {
      const key = upstream.script("ai sdk generate", { kind: "sse", events: contentStream(splitBySizes(TEXT, [4, 1])) })
      const result = await generateText({ model: provider()("tc"), prompt: key, tools, stopWhen: stepCountIs(1) })
      expect(result.toolCalls.map((c) => ({ toolName: c.toolName, input: c.input }))).toEqual([
        { toolName: "get_weather", input: PARIS }
      ])
      expect(result.text).toBe("Looking it up.\n")
      expect(result.text).not.toMatch(/<tool|tool_call|\{"name"/)
      expect(result.finishReason).toBe("tool-calls")
      expect(result.toolResults.map((r) => r.output)).toEqual([{ city: "Paris", temperatureC: 18 }])
    })
  })
})
