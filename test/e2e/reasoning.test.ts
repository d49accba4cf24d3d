import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually, fetchMetrics, metricSum } from "../support/e2e.js"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { completionTokens, FAKE_MODEL, type Script } from "../support/fakeUpstream.js"
import { type ScenarioUpstream, startScenarioUpstream } from "../support/scenarios.js"
import {
  awkwardSplits,
  chunkStream,
  collect,
  contentStream,
  type ContentStreamOptions,
  cutsAround,
  splitBySizes,
  type StreamSummary,
  type WireCompletion
} from "../support/toolsReasoning.js"

/**
 * Reasoning end to end: upstream `reasoning_content` / `reasoning` and a
 * leading `<think>` block go out as reasoning (in the configured field),
 * never inside content; hiding; reasoning-only runs; end tokens; usage and
 * metrics.
 */

/** The request fields for reasoning that the OpenAI SDK's types do not name. */
interface ReasoningParams {
  readonly include_reasoning?: boolean
  readonly reasoning?: { readonly exclude?: boolean }
  readonly metadata?: Record<string, string>
  readonly stream_options?: { readonly include_usage?: boolean }
}

type StreamParams = OpenAI.ChatCompletionCreateParamsStreaming & ReasoningParams
type JsonParams = OpenAI.ChatCompletionCreateParamsNonStreaming & ReasoningParams

const REASONING = ["Two plus ", "two ", "is four."]
const ANSWER = ["The answer ", "is 4."]

/** No reasoning field of any name on any chunk. */
const expectNoReasoning = (s: StreamSummary, label = "") => {
  expect(s.reasoningContents, label).toEqual([])
  expect(s.reasonings, label).toEqual([])
  for (const c of s.chunks) {
    for (const choice of c.choices) {
      expect(choice.delta, label).not.toHaveProperty("reasoning_content")
      expect(choice.delta, label).not.toHaveProperty("reasoning")
    }
  }
}

describe("reasoning through a fake upstream", () => {
  let upstream: ScenarioUpstream
  let edge: EdgeProcess
  let client: OpenAI

  beforeAll(async () => {
    upstream = await startScenarioUpstream()
    const provider = { type: "openai", baseUrl: upstream.url, model: FAKE_MODEL }
    edge = await startEdge({
      config: {
        models: [
          { id: "r", provider },
          { id: "r-field-reasoning", provider, reasoning: { field: "reasoning" } },
          { id: "r-both", provider, reasoning: { field: "both" } },
          { id: "r-implicit", provider, reasoning: { implicitOpen: true } },
          { id: "r-strict", provider, output: { strict: true } }
        ]
      }
    })
    client = new OpenAI({ baseURL: edge.baseURL, apiKey: "x", maxRetries: 0 })
  })
  afterAll(async () => {
    await edge?.stop()
    await upstream?.close()
  })

  const script = (key: string, s: Script) => upstream.script(key, s)
  const sse = (events: Array<object>): Script => ({ kind: "sse", events })

  const stream = (model: string, key: string, extra: ReasoningParams = {}): Promise<StreamSummary> => {
    const params: StreamParams = { model, stream: true, messages: [{ role: "user", content: key }], ...extra }
    return client.chat.completions.create(params).then(collect)
  }

  const complete = async (model: string, key: string, extra: ReasoningParams = {}): Promise<WireCompletion> => {
    const params: JsonParams = { model, messages: [{ role: "user", content: key }], ...extra }
    const completion = await client.chat.completions.create(params)
    return completion as unknown as WireCompletion
  }

  const answerWithReasoning = (opts: ContentStreamOptions = { reasoning: REASONING }) =>
    sse(contentStream(ANSWER, opts))

  describe("where reasoning goes", () => {
    it("upstream reasoning_content arrives as delta.reasoning_content, before the content and never inside it", async () => {
      const key = script("rc", answerWithReasoning())
      const s = await stream("r", key)
      expect(s.reasoningContent).toBe(REASONING.join(""))
      expect(s.reasonings).toEqual([])
      expect(s.content).toBe(ANSWER.join(""))
      for (const piece of REASONING) expect(s.content).not.toContain(piece.trim())
      const firstReasoning = s.chunks.findIndex((c) => c.choices[0]?.delta.reasoning_content !== undefined)
      const firstContent = s.chunks.findIndex((c) => (c.choices[0]?.delta.content ?? "") !== "")
      expect(firstReasoning).toBeGreaterThan(0)
      expect(firstReasoning).toBeLessThan(firstContent)
      expect(s.finishReasons).toEqual(["stop"])
    })

    it("upstream reasoning (vLLM's newer field) is sent as reasoning_content by default", async () => {
      const key = script("vllm reasoning", answerWithReasoning({ reasoningField: REASONING }))
      const s = await stream("r", key)
      expect(s.reasoningContent).toBe(REASONING.join(""))
      expect(s.reasonings).toEqual([])
      expect(s.content).toBe(ANSWER.join(""))
    })

    it("a model with reasoning.field \"reasoning\" sends delta.reasoning and no reasoning_content", async () => {
      const key = script("field reasoning", answerWithReasoning())
      const s = await stream("r-field-reasoning", key)
      expect(s.reasoning).toBe(REASONING.join(""))
      expect(s.reasoningContents).toEqual([])
      expect(s.content).toBe(ANSWER.join(""))
    })

    it("a model with reasoning.field \"both\" sends each reasoning delta in both fields", async () => {
      const key = script("field both", answerWithReasoning({ reasoningField: REASONING }))
      const s = await stream("r-both", key)
      expect(s.reasoningContent).toBe(REASONING.join(""))
      expect(s.reasoning).toBe(REASONING.join(""))
      for (const c of s.chunks) {
        const d = c.choices[0]?.delta
        if (d?.reasoning_content !== undefined || d?.reasoning !== undefined) expect(d.reasoning).toBe(d.reasoning_content)
      }
      expect(s.content).toBe(ANSWER.join(""))
    })

    it("request metadata.iop_reasoning_field overrides the model's field", async () => {
      const key = script("field override", answerWithReasoning())
      const asReasoning = await stream("r", key, { metadata: { iop_reasoning_field: "reasoning" } })
      expect(asReasoning.reasoning).toBe(REASONING.join(""))
      expect(asReasoning.reasoningContents).toEqual([])

      const asContent = await stream("r-field-reasoning", key, { metadata: { iop_reasoning_field: "reasoning_content" } })
      expect(asContent.reasoningContent).toBe(REASONING.join(""))
      expect(asContent.reasonings).toEqual([])

      const asBoth = await stream("r", key, { metadata: { iop_reasoning_field: "both" } })
      expect(asBoth.reasoningContent).toBe(REASONING.join(""))
      expect(asBoth.reasoning).toBe(REASONING.join(""))

      const json = await complete("r", key, { metadata: { iop_reasoning_field: "reasoning" } })
      expect(json.choices[0]!.message.reasoning).toBe(REASONING.join(""))
      expect(json.choices[0]!.message).not.toHaveProperty("reasoning_content")
    })

    it("non-stream: message.reasoning_content holds the whole reasoning and content only the answer", async () => {
      const key = script("json reasoning", answerWithReasoning())
      const json = await complete("r", key)
      const message = json.choices[0]!.message
      expect(message.reasoning_content).toBe(REASONING.join(""))
      expect(message.content).toBe(ANSWER.join(""))
      expect(json.choices[0]!.finish_reason).toBe("stop")

      const viaField = await complete("r-field-reasoning", key)
      expect(viaField.choices[0]!.message.reasoning).toBe(REASONING.join(""))
      expect(viaField.choices[0]!.message).not.toHaveProperty("reasoning_content")
    })
  })

  describe("<think> blocks in content", () => {
    const THOUGHT = "Two plus two is four, so 4."
    const AFTER = "The answer is 4."
    const TEXT = `<think>${THOUGHT}</think>\n\n${AFTER}`

    const expectRouted = (s: StreamSummary, label: string, thought = THOUGHT, after = AFTER) => {
      expect(s.reasoningContent, label).toBe(thought)
      expect(s.content, label).toBe(after)
      for (const piece of [...s.contents, ...s.reasoningContents]) {
        expect(piece, label).not.toMatch(/<\/?t?h?i?n?k?>?$|<\/?think|think>/)
      }
    }

    it("a leading <think>…</think> split at every awkward place goes to reasoning; content has no tags", async () => {
      const splits = [
        ...awkwardSplits(TEXT),
        ...cutsAround(TEXT, ["<think>", "</think>\n\n"]).map((pieces) => ({ name: "two-way cut", pieces }))
      ]
      const results = await Promise.all(
        splits.map(async (split, i) => {
          const key = script(`think ${i}`, sse(contentStream(split.pieces)))
          return { split, s: await stream("r", key) }
        })
      )
      for (const { s, split } of results) {
        expectRouted(s, `${split.name} ${JSON.stringify(split.pieces)}`)
        expect(s.finishReasons).toEqual(["stop"])
      }
    })

    it("non-stream: a leading <think> block is message.reasoning_content, content has no tags", async () => {
      const key = script("think json", sse(contentStream(splitBySizes(TEXT, [3, 1, 5]))))
      const message = (await complete("r", key)).choices[0]!.message
      expect(message.reasoning_content).toBe(THOUGHT)
      expect(message.content).toBe(AFTER)
    })

    it("reasoning.implicitOpen: content \"plan…</think>answer\" is reasoning up to </think>, then the answer", async () => {
      const plan = "plan: add two and two"
      const text = `${plan}</think>answer: 4`
      const splits = [
        ...awkwardSplits(text),
        ...cutsAround(text, ["</think>"]).map((pieces) => ({ name: "two-way cut", pieces }))
      ]
      const results = await Promise.all(
        splits.map(async (split, i) => {
          const key = script(`implicit ${i}`, sse(contentStream(split.pieces)))
          return { split, s: await stream("r-implicit", key) }
        })
      )
      for (const { s, split } of results) expectRouted(s, `${split.name} ${JSON.stringify(split.pieces)}`, plan, "answer: 4")
    })
  })

  describe("hiding reasoning", () => {
    const withThink = () => sse(contentStream(["<think>secret ", "plan</think>", "Visible answer."], { reasoning: ["more secret"] }))

    it("include_reasoning: false hides upstream reasoning and the <think> block; content is the answer", async () => {
      const key = script("hide include", withThink())
      const s = await stream("r", key, { include_reasoning: false })
      expectNoReasoning(s)
      expect(s.content).toBe("Visible answer.")
      const message = (await complete("r", key, { include_reasoning: false })).choices[0]!.message
      expect(message).not.toHaveProperty("reasoning_content")
      expect(message).not.toHaveProperty("reasoning")
      expect(message.content).toBe("Visible answer.")
    })

    it("reasoning: { exclude: true } hides the reasoning", async () => {
      const key = script("hide exclude", withThink())
      const s = await stream("r-both", key, { reasoning: { exclude: true } })
      expectNoReasoning(s)
      expect(s.content).toBe("Visible answer.")
    })

    it("a strict model hides reasoning unless the request asks for it (include_reasoning: true or reasoning.exclude: false)", async () => {
      const key = script("strict hide", answerWithReasoning())
      const hidden = await stream("r-strict", key)
      expectNoReasoning(hidden)
      expect(hidden.content).toBe(ANSWER.join(""))
      const hiddenJson = (await complete("r-strict", key)).choices[0]!.message
      expect(hiddenJson).not.toHaveProperty("reasoning_content")

      const asked = await stream("r-strict", key, { include_reasoning: true })
      expect(asked.reasoningContent).toBe(REASONING.join(""))
      expect(asked.content).toBe(ANSWER.join(""))
      const askedByExclude = await stream("r-strict", key, { reasoning: { exclude: false } })
      expect(askedByExclude.reasoningContent).toBe(REASONING.join(""))
      const askedJson = (await complete("r-strict", key, { include_reasoning: true })).choices[0]!.message
      expect(askedJson.reasoning_content).toBe(REASONING.join(""))
    })
  })

  describe("reasoning-only runs", () => {
    const THOUGHT = ["Let me think ", "about this ", "carefully."]

    it("a non-strict reasoning-only run still yields non-empty content: the reasoning itself when shown", async () => {
      const key = script("only shown", sse(contentStream([], { reasoning: THOUGHT })))
      const s = await stream("r", key)
      expect(s.reasoningContent).toBe(THOUGHT.join(""))
      expect(s.content.trim()).not.toBe("")
      expect(s.content).toContain(THOUGHT.join("").trim())
      expect(s.finishReasons).toEqual(["stop"])
      const message = (await complete("r", key)).choices[0]!.message
      expect(message.content).toContain(THOUGHT.join("").trim())
    })

    it("when reasoning is hidden, a reasoning-only run answers with a placeholder that mentions hidden reasoning", async () => {
      const key = script("only hidden", sse(contentStream([], { reasoning: THOUGHT })))
      const s = await stream("r", key, { include_reasoning: false })
      expectNoReasoning(s)
      expect(s.content).toMatch(/hidden reasoning/i)
      expect(s.content).not.toContain("carefully")
      const message = (await complete("r", key, { reasoning: { exclude: true } })).choices[0]!.message
      expect(message.content).toMatch(/hidden reasoning/i)
    })

    it("a reasoning-only run cut by finish_reason length says it ran out of tokens", async () => {
      const key = script("only length", sse(contentStream([], { reasoning: THOUGHT, finish_reason: "length" })))
      const s = await stream("r", key, { include_reasoning: false })
      expectNoReasoning(s)
      expect(s.content).toMatch(/ran out of tokens/i)
      expect(s.finishReasons).toEqual(["length"])
      const json = await complete("r", key, { include_reasoning: false })
      expect(json.choices[0]!.message.content).toMatch(/ran out of tokens/i)
      expect(json.choices[0]!.finish_reason).toBe("length")
    })
  })

  describe("end tokens", () => {
    const TOKENS = ["<|im_end|>", "<|eot_id|>", "<|endoftext|>", "</s>"]

    it("an end token split across deltas never reaches content or reasoning", async () => {
      for (const token of TOKENS) {
        const content = `Hello there${token}`
        const thought = `Thinking${token}`
        for (const [i, sizes] of [[1], [2], [3, 1], [5, 2, 1]].entries()) {
          const key = script(`sentinel ${token} ${i}`, sse(chunkStream([
            ...splitBySizes(thought, sizes).map((reasoning_content) => ({ reasoning_content })),
            ...splitBySizes(content, sizes).map((c) => ({ content: c }))
          ])))
          const s = await stream("r", key)
          const label = `${token} split ${JSON.stringify(sizes)}`
          expect(s.content, label).toBe("Hello there")
          expect(s.reasoningContent, label).toBe("Thinking")
          for (const piece of [...s.contents, ...s.reasoningContents]) {
            expect(piece, label).not.toMatch(/<\||\|>|im_end|eot_id|endoftext|<\/s/)
          }
        }
      }
    })

    it("an end token split across deltas inside a <think> block is dropped from reasoning too", async () => {
      const text = "<think>ponder<|im_end|></think>Done."
      const key = script("sentinel think", sse(contentStream(splitBySizes(text, [4, 3, 2]))))
      const s = await stream("r", key)
      expect(s.reasoningContent).toBe("ponder")
      for (const piece of [...s.contents, ...s.reasoningContents]) expect(piece).not.toMatch(/<\||\|>|im_end/)
    })

    it("non-stream: the end token and the text after it are dropped", async () => {
      const key = script("sentinel json", sse(contentStream(["All done", "<|im_", "end|>", "\nuser: garbage"])))
      const message = (await complete("r", key)).choices[0]!.message
      expect(message.content).toBe("All done")
    })
  })

  describe("usage and metrics", () => {
    const USAGE = completionTokens(30, 20, { cached: 12, reasoning: 8 })

    it("usage carries completion_tokens_details.reasoning_tokens and prompt_tokens_details.cached_tokens, streamed and in JSON", async () => {
      const key = script("usage", sse(contentStream(ANSWER, { reasoning: REASONING, usage: USAGE })))
      const s = await stream("r", key, { stream_options: { include_usage: true } })
      expect(s.usage).toMatchObject({
        prompt_tokens: 30,
        completion_tokens: 20,
        total_tokens: 50,
        prompt_tokens_details: { cached_tokens: 12 },
        completion_tokens_details: { reasoning_tokens: 8 }
      })
      // The usage chunk comes after the finish chunk and has no choices.
      const last = s.chunks[s.chunks.length - 1]!
      expect(last.choices).toEqual([])
      expect(s.chunks[s.chunks.length - 2]!.choices[0]?.finish_reason).toBe("stop")

      const json = await complete("r", key)
      expect(json.usage).toMatchObject({
        prompt_tokens: 30,
        completion_tokens: 20,
        total_tokens: 50,
        prompt_tokens_details: { cached_tokens: 12 },
        completion_tokens_details: { reasoning_tokens: 8 }
      })
    })

    it("/metrics counts reasoning tokens (iop_tokens_total kind=\"reasoning\") and reasoning characters by model after traffic", async () => {
      const labels = { model: "r-both" }
      const before = await fetchMetrics(edge.url)
      const tokens0 = metricSum(before, "iop_tokens_total", { ...labels, kind: "reasoning" })
      const cached0 = metricSum(before, "iop_tokens_total", { ...labels, kind: "cached" })
      const chars0 = metricSum(before, "iop_reasoning_characters_total", labels)
      const thought = "0123456789abcdefghij" // 20 characters
      const key = script("metrics", sse(contentStream(ANSWER, { reasoning: splitBySizes(thought, [7]), usage: USAGE })))
      await stream("r-both", key, { stream_options: { include_usage: true } })
      await complete("r-both", key)
      await eventually(async () => {
        const after = await fetchMetrics(edge.url)
        expect(after).toMatch(/^iop_tokens_total\{[^}]*kind="reasoning"[^}]*\} /m)
        expect(after).toMatch(/^iop_reasoning_characters_total\{[^}]*\} /m)
        expect(metricSum(after, "iop_tokens_total", { ...labels, kind: "reasoning" }) - tokens0).toBe(16)
        expect(metricSum(after, "iop_tokens_total", { ...labels, kind: "cached" }) - cached0).toBe(24)
        expect(metricSum(after, "iop_reasoning_characters_total", labels) - chars0).toBe(40)
      })
    })
  })
})
