import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually, fetchMetrics, metricSum, postJson, sseReader, untilContent } from "../support/e2e.js"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { chunk, FAKE_MODEL, textStream } from "../support/fakeUpstream.js"
import { type ScenarioUpstream, startScenarioUpstream } from "../support/scenarios.js"

/** A caller that goes away cancels its run: the upstream request is aborted within 1 s, /metrics says `cancelled`. */

const LONG_TEXT = Array.from({ length: 200 }, (_, i) => `word${i}`).join(" ")

describe("cancel on disconnect", () => {
  let upstream: ScenarioUpstream
  let edge: EdgeProcess
  let client: OpenAI

  const cancelled = async (model: string) =>
    metricSum(await fetchMetrics(edge.url), "iop_chat_requests_total", { model, outcome: "cancelled" })

  /** Waits for the upstream to see a new aborted connection; returns when. */
  const nextAbort = (before: number) =>
    eventually(() => {
      expect(upstream.aborted.length).toBeGreaterThan(before)
      return upstream.aborted[before]!.at
    }, 3_000)

  beforeAll(async () => {
    upstream = await startScenarioUpstream()
    edge = await startEdge({
      config: {
        models: [
          { id: "echo", provider: { type: "echo", tokenDelayMs: 20 } },
          { id: "up", provider: { type: "openai", baseUrl: upstream.url, model: FAKE_MODEL } }
        ]
      }
    })
    client = new OpenAI({ baseURL: edge.baseURL, apiKey: "x", maxRetries: 0 })
  })
  afterAll(async () => {
    await edge?.stop()
    await upstream?.close()
  })

  it("a streaming client that aborts its fetch mid-stream gets its upstream request aborted within 1 s", async () => {
    const key = upstream.script("fetch abort", {
      kind: "stall",
      before: [chunk({ role: "assistant", content: "" }), chunk({ content: "Hel" })]
    })
    const abortedBefore = upstream.aborted.length
    const cancelledBefore = await cancelled("up")
    const controller = new AbortController()
    const response = await postJson(
      `${edge.baseURL}/chat/completions`,
      { model: "up", stream: true, messages: [{ role: "user", content: key }] },
      {},
      controller.signal
    )
    expect(response.status).toBe(200)
    const reader = sseReader(response)
    await untilContent(reader)
    const abortTime = Date.now()
    controller.abort()

    const at = await nextAbort(abortedBefore)
    expect(at - abortTime).toBeLessThan(1_000)
    await eventually(async () => expect((await cancelled("up")) - cancelledBefore).toBe(1))
  })

  it("an SDK stream aborted with controller.abort() gets its upstream request aborted within 1 s", async () => {
    const key = upstream.script("sdk abort", {
      kind: "sse",
      delayMs: 50,
      events: textStream(Array.from({ length: 200 }, (_, i) => `t${i} `))
    })
    const abortedBefore = upstream.aborted.length
    const stream = await client.chat.completions.create({ model: "up", stream: true, messages: [{ role: "user", content: key }] })
    let abortTime = 0
    let text = ""
    try {
      for await (const c of stream) {
        text += c.choices[0]?.delta.content ?? ""
        if (text.length > 0 && abortTime === 0) {
          abortTime = Date.now()
          stream.controller.abort()
        }
      }
    } catch (e) {
      // The SDK may end the iteration with an abort error.
      expect(String(e)).toMatch(/abort/i)
    }
    expect(abortTime).toBeGreaterThan(0)
    const at = await nextAbort(abortedBefore)
    expect(at - abortTime).toBeLessThan(1_000)
    // The upstream did not get to finish its 10 s stream.
    expect(text.length).toBeLessThan(200 * 4)
  })

  /** Sends a non-stream request to a stalled upstream and disconnects once the upstream has it; returns when. */
  const leaveNonStream = async (key: string): Promise<number> => {
    const controller = new AbortController()
    const pending = postJson(
      `${edge.baseURL}/chat/completions`,
      { model: "up", messages: [{ role: "user", content: key }] },
      {},
      controller.signal
    ).catch((e: unknown) => e)
    await eventually(() => expect(upstream.requestsFor(key)).toHaveLength(1))
    const abortTime = Date.now()
    controller.abort()
    expect(await pending).toBeInstanceOf(Error)
    return abortTime
  }

  it("a non-stream client that disconnects gets its upstream request aborted within 1 s", async () => {
    const key = upstream.script("non-stream abort", { kind: "stall", before: [chunk({ role: "assistant", content: "" })] })
    const abortedBefore = upstream.aborted.length
    const abortTime = await leaveNonStream(key)
    const at = await nextAbort(abortedBefore)
    expect(at - abortTime).toBeLessThan(1_000)
  })

  it("a non-stream request whose client left is counted in /metrics with outcome cancelled", async () => {
    const key = upstream.script("non-stream abort metrics", { kind: "stall", before: [chunk({ role: "assistant", content: "" })] })
    const abortedBefore = upstream.aborted.length
    const cancelledBefore = await cancelled("up")
    await leaveNonStream(key)
    await nextAbort(abortedBefore)
    await eventually(async () => expect((await cancelled("up")) - cancelledBefore).toBe(1), 1_500)
  })

  it("an echo stream whose client leaves is cancelled and counted with outcome cancelled", async () => {
    const before = await cancelled("echo")
    const controller = new AbortController()
    const response = await postJson(
      `${edge.baseURL}/chat/completions`,
      { model: "echo", stream: true, messages: [{ role: "user", content: LONG_TEXT }] },
      {},
      controller.signal
    )
    const reader = sseReader(response)
    await untilContent(reader)
    controller.abort()
    // 200 words at 20 ms a token would take seconds: the count must come long before that.
    await eventually(async () => expect((await cancelled("echo")) - before).toBe(1), 1_500)
    const text = await fetchMetrics(edge.url)
    expect(text).toMatch(/^iop_chat_requests_total\{[^}]*model="echo"[^}]*outcome="cancelled"[^}]*\} 1$/m)
  })

  it("the edge still serves after its callers went away", async () => {
    const completion = await client.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "still here" }] })
    expect(completion.choices[0]!.message.content).toBe("still here")
  })
})
