import { Agent, type ClientRequest, request } from "node:http"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually, fetchMetrics, metricSum, postJson, sseReader, untilContent } from "../support/e2e.js"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { chunk, FAKE_MODEL } from "../support/fakeUpstream.js"
import { type ScenarioUpstream, startScenarioUpstream } from "../support/scenarios.js"

/**
 * A caller that goes away cancels its run: its upstream request is aborted, /metrics says `cancelled`. Every
 * upstream here stalls (or would outlast the test), so an aborted upstream request can only be the edge passing
 * on the caller's leaving: no idle timeout (60 s by default) or end of stream comes first.
 */

const LONG_TEXT = Array.from({ length: 2_000 }, (_, i) => `word${i}`).join(" ")

describe("cancel on disconnect", () => {
  let upstream: ScenarioUpstream
  let edge: EdgeProcess
  let client: OpenAI

  const cancelled = async (model: string) =>
    metricSum(await fetchMetrics(edge.url), "iop_chat_requests_total", { model, outcome: "cancelled" })

  /** Waits for the upstream to see a new aborted connection. */
  const nextAbort = (before: number) =>
    eventually(() => {
      expect(upstream.aborted.length).toBeGreaterThan(before)
    })

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

  it("a streaming client that aborts its fetch mid-stream gets its upstream request aborted", async () => {
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
    controller.abort()

    await nextAbort(abortedBefore)
    await eventually(async () => expect((await cancelled("up")) - cancelledBefore).toBe(1))
  })

  it("an SDK stream aborted with controller.abort() gets its upstream request aborted", async () => {
    const key = upstream.script("sdk abort", {
      kind: "stall",
      before: [chunk({ role: "assistant", content: "" }), chunk({ content: "t0 " }), chunk({ content: "t1 " })]
    })
    const abortedBefore = upstream.aborted.length
    const finishedBefore = upstream.finished.length
    const stream = await client.chat.completions.create({ model: "up", stream: true, messages: [{ role: "user", content: key }] })
    let aborted = false
    let text = ""
    try {
      for await (const c of stream) {
        text += c.choices[0]?.delta.content ?? ""
        if (text.length > 0 && !aborted) {
          aborted = true
          stream.controller.abort()
        }
      }
    } catch (e) {
      // The SDK may end the iteration with an abort error.
      expect(String(e)).toMatch(/abort/i)
    }
    expect(aborted).toBe(true)
    await nextAbort(abortedBefore)
    // The upstream did not get to finish its stream.
    expect(upstream.finished.length).toBe(finishedBefore)
  })

  /** Sends a non-stream request to a stalled upstream and disconnects once the upstream has it. */
  const leaveNonStream = async (key: string): Promise<void> => {
    const controller = new AbortController()
    const pending = postJson(
      `${edge.baseURL}/chat/completions`,
      { model: "up", messages: [{ role: "user", content: key }] },
      {},
      controller.signal
    ).catch((e: unknown) => e)
    await eventually(() => expect(upstream.requestsFor(key)).toHaveLength(1))
    controller.abort()
    expect(await pending).toBeInstanceOf(Error)
  }

  it("a non-stream client that disconnects gets its upstream request aborted", async () => {
    const key = upstream.script("non-stream abort", { kind: "stall", before: [chunk({ role: "assistant", content: "" })] })
    const abortedBefore = upstream.aborted.length
    await leaveNonStream(key)
    await nextAbort(abortedBefore)
  })

  it("a non-stream request whose client left is counted in /metrics with outcome cancelled", async () => {
    const key = upstream.script("non-stream abort metrics", { kind: "stall", before: [chunk({ role: "assistant", content: "" })] })
    const abortedBefore = upstream.aborted.length
    const cancelledBefore = await cancelled("up")
    await leaveNonStream(key)
    await nextAbort(abortedBefore)
    await eventually(async () => expect((await cancelled("up")) - cancelledBefore).toBe(1))
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
    // 2,000 words at 20 ms a token would outlast the test: a run that ended counted as cancelled was cancelled.
    await eventually(async () => expect((await cancelled("echo")) - before).toBe(1))
    const text = await fetchMetrics(edge.url)
    expect(text).toMatch(/^iop_chat_requests_total\{[^}]*model="echo"[^}]*outcome="cancelled"[^}]*\} 1$/m)
  })

  it("1000 streaming clients that leave at once: every one of their upstream requests is aborted", async () => {
    const N = 1000
    const key = upstream.script("thousand", { kind: "stall", before: [chunk({ role: "assistant", content: "" }), chunk({ content: "x" })] })
    const abortedBefore = upstream.aborted.length
    const agent = new Agent({ keepAlive: false, maxSockets: Infinity })
    const body = JSON.stringify({ model: "up", stream: true, messages: [{ role: "user", content: key }] })
    const url = new URL(`${edge.baseURL}/chat/completions`)
    // Each client waits for its first content chunk (its run is live upstream), then all leave in one tick.
    const opened = await Promise.all(
      Array.from({ length: N }, () =>
        new Promise<ClientRequest>((resolve, reject) => {
          const req = request(
            { host: url.hostname, port: url.port, path: url.pathname, method: "POST", agent, headers: { "content-type": "application/json" } },
            (res) => {
              res.on("data", (bytes: Buffer) => {
                if (bytes.toString().includes('"content":"x"')) resolve(req)
              })
            }
          )
          req.on("error", (e) => (req.destroyed ? undefined : reject(e)))
          req.end(body)
        }))
    )
    for (const req of opened) req.destroy()
    await eventually(() => expect(upstream.aborted.length - abortedBefore).toBe(N))
    agent.destroy()
  }, 60_000)

  it("the edge still serves after its callers went away", async () => {
    const completion = await client.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "still here" }] })
    expect(completion.choices[0]!.message.content).toBe("still here")
  })
})
