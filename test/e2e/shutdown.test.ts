import OpenAI from "openai"
import { afterAll, describe, expect, it } from "vitest"
import { eventually, expectDoneOnce, jsonOf, parseSse, postJson, sseReader, startGatedUpstream, untilContent } from "../support/e2e.js"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { FAKE_MODEL } from "../support/fakeUpstream.js"

/** SIGTERM / SIGINT: refuse new work, let open streams finish within the grace period, cancel the rest, exit 0. */

const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(" ")

const openStream = async (edge: EdgeProcess, text: string, model = "echo") => {
  const response = await postJson(`${edge.baseURL}/chat/completions`, {
    model,
    stream: true,
    messages: [{ role: "user", content: text }]
  })
  expect(response.status).toBe(200)
  const reader = sseReader(response)
  await untilContent(reader)
  return reader
}

describe.concurrent("graceful shutdown", () => {
  const edges: Array<EdgeProcess> = []
  afterAll(async () => {
    await Promise.all(edges.map((edge) => edge.stop("SIGKILL")))
  })

  it("SIGTERM with an open stream: /healthz 503, new requests 503, the stream finishes normally, exit 0", async () => {
    const upstream = await startGatedUpstream()
    try {
      const edge = await startEdge({
        config: {
          // A grace no slow machine runs into: the stream ends when the test lets the upstream finish it.
          server: { shutdownGraceMs: 120_000 },
          models: [{ id: "gated", provider: { type: "openai", baseUrl: upstream.url, model: FAKE_MODEL } }]
        }
      })
      edges.push(edge)
      const reader = await openStream(edge, "hello", "gated")

      edge.proc.kill("SIGTERM")
      await eventually(async () => {
        const health = await fetch(`${edge.url}/healthz`)
        await health.text()
        expect(health.status).toBe(503)
      })

      const refused = await postJson(`${edge.baseURL}/chat/completions`, {
        model: "gated",
        messages: [{ role: "user", content: "too late" }]
      })
      expect(refused.status).toBe(503)
      const body = await jsonOf(refused)
      expect(body.error.type).toBe("service_unavailable")

      const client = new OpenAI({ baseURL: edge.baseURL, apiKey: "x", maxRetries: 0 })
      await expect(client.models.list()).rejects.toMatchObject({ status: 503 })

      // The edge is draining and the stream still open: now let it end.
      expect(edge.proc.exitCode).toBeNull()
      upstream.release()
      const sse = parseSse(await reader.rest())
      expectDoneOnce(sse)
      expect(sse.events.some((e) => "error" in e)).toBe(false)
      expect(sse.events.map((e) => e.choices[0]?.delta.content ?? "").join("")).toBe("Hello")
      const last = sse.events[sse.events.length - 1]
      expect(last.choices[0].finish_reason).toBe("stop")

      expect(await edge.exited).toBe(0)
    } finally {
      await upstream.close()
    }
  })

  it("SIGTERM with a stream longer than server.shutdownGraceMs: it ends with a run_error event then [DONE], exit 0", async () => {
    const edge = await startEdge({
      config: {
        server: { shutdownGraceMs: 200 },
        models: [{ id: "echo", provider: { type: "echo", tokenDelayMs: 20 } }]
      }
    })
    edges.push(edge)
    // 4,000+ tokens at 20 ms: over a minute, far beyond the 200 ms grace and this test's timeout, so the
    // stream can only end early because the edge cancelled it.
    const reader = await openStream(edge, words(2_000))

    edge.proc.kill("SIGTERM")
    const sse = parseSse(await reader.rest())
    expectDoneOnce(sse)
    const errors = sse.events.filter((e) => "error" in e)
    expect(errors, sse.raw).toHaveLength(1)
    expect(errors[0].error.type).toBe("run_error")
    expect(typeof errors[0].error.message).toBe("string")
    expect(sse.events[sse.events.length - 1]).toBe(errors[0])
    // No finish chunk: cancelled, not run to its end.
    expect(sse.events.some((e) => e.choices?.[0]?.finish_reason != null)).toBe(false)
    expect(await edge.exited).toBe(0)
  })

  it("SIGINT drains and exits 0 like SIGTERM", async () => {
    const edge = await startEdge({ config: { models: [{ id: "echo", provider: { type: "echo", tokenDelayMs: 0 } }] } })
    edges.push(edge)
    expect((await fetch(`${edge.url}/healthz`)).status).toBe(200)
    expect(await edge.stop("SIGINT")).toBe(0)
  })
})
