import * as http from "node:http"
import { createServer } from "node:net"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually, expectDoneOnce, fetchMetrics, metricSum, postJson, readSse, type SseResult, jsonOf } from "../support/e2e.js"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { chunk, errorEvent, FAKE_MODEL, textStream } from "../support/fakeUpstream.js"
import { type ScenarioUpstream, startScenarioUpstream } from "../support/scenarios.js"

/** Errors before and after a response starts, in the OpenAI error shape, JSON and SSE; counted in /metrics. */

const IDLE_TIMEOUT_MS = 300
const MAX_BODY = 16_384

/** Rejects with the SDK's error (fails the test when the call succeeds). */
const apiError = async (call: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> => {
  try {
    await call
  } catch (e) {
    expect(e).toBeInstanceOf(OpenAI.APIError)
    return e as InstanceType<typeof OpenAI.APIError>
  }
  throw new Error("expected the request to fail")
}

/** A port nothing listens on. */
const closedPort = async (): Promise<number> => {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** The OpenAI error envelope: `{"error": {"message", "type", "param", "code"}}`. */
const expectErrorShape = (body: any, type: string) => {
  expect(Object.keys(body)).toEqual(["error"])
  expect(body.error.type).toBe(type)
  expect(typeof body.error.message).toBe("string")
  expect(body.error.message.length).toBeGreaterThan(0)
  expect(body.error).toHaveProperty("param")
  expect(body.error).toHaveProperty("code")
}

/** A stream that failed after it started: content (maybe), then one error event, then [DONE]; never a finish chunk. */
const expectStreamError = (sse: SseResult, type: string): { message: string } => {
  expectDoneOnce(sse)
  const errors = sse.events.filter((e) => "error" in e)
  expect(errors, sse.raw).toHaveLength(1)
  const error = errors[0]
  expect(sse.events[sse.events.length - 1]).toBe(error)
  expect(error.error.type).toBe(type)
  expect(typeof error.error.message).toBe("string")
  expect(sse.events.some((e) => e.choices?.some((c: { finish_reason: unknown }) => c.finish_reason != null))).toBe(false)
  return error.error
}

describe("errors", () => {
  let upstream: ScenarioUpstream
  let edge: EdgeProcess
  let client: OpenAI
  const chatUrl = () => `${edge.baseURL}/chat/completions`

  beforeAll(async () => {
    upstream = await startScenarioUpstream()
    const dead = await closedPort()
    edge = await startEdge({
      config: {
        server: { maxBodyBytes: MAX_BODY },
        runs: { idleTimeoutMs: IDLE_TIMEOUT_MS },
        models: [
          { id: "echo", provider: { type: "echo", tokenDelayMs: 0 } },
          { id: "up", provider: { type: "openai", baseUrl: upstream.url, model: FAKE_MODEL } },
          { id: "dead", provider: { type: "openai", baseUrl: `http://127.0.0.1:${dead}/v1`, model: FAKE_MODEL } }
        ]
      }
    })
    client = new OpenAI({ baseURL: edge.baseURL, apiKey: "x", maxRetries: 0 })
  })
  // SIGKILL: this edge is not under test for shutdown (see shutdown.test.ts), and a request
  // that broke off mid-body (the chunked over-limit one) may keep it from draining quickly.
  afterAll(async () => {
    await edge?.stop("SIGKILL")
    await upstream?.close()
  })

  describe("before the response starts", () => {
    it("a body that is not JSON is a 400 invalid_request_error", async () => {
      const response = await postJson(chatUrl(), "{not json")
      expect(response.status).toBe(400)
      expect(response.headers.get("content-type")).toMatch(/^application\/json/)
      expectErrorShape(await jsonOf(response), "invalid_request_error")
    })

    it("missing messages is a 400 invalid_request_error whose message names the field", async () => {
      const e = await apiError(client.chat.completions.create({ model: "echo" } as never))
      expect(e.status).toBe(400)
      expect(e.type).toBe("invalid_request_error")
      expect(e.message).toContain("messages")
    })

    it("a message with a wrong role is a 400 invalid_request_error naming messages[0].role", async () => {
      const e = await apiError(
        client.chat.completions.create({ model: "echo", messages: [{ role: "bot", content: "hi" }] } as never)
      )
      expect(e.status).toBe(400)
      expect(e.type).toBe("invalid_request_error")
      expect(e.message).toContain("messages[0].role")
    })

    it("a field of the wrong type is a 400 naming the field (stream request too)", async () => {
      const e = await apiError(
        client.chat.completions.create({
          model: "echo",
          stream: true,
          temperature: "hot",
          messages: [{ role: "user", content: "hi" }]
        } as never)
      )
      expect(e.status).toBe(400)
      expect(e.type).toBe("invalid_request_error")
      expect(e.message).toContain("temperature")
    })

    it("a long offending value is not quoted back: the 400 names the field in at most 300 characters", async () => {
      const long = "x".repeat(MAX_BODY - 1_000)
      for (const body of [
        { model: "echo", messages: [{ role: long, content: "hi" }] },
        { model: "echo", temperature: long, messages: [{ role: "user", content: "hi" }] },
        { model: { name: long }, messages: [{ role: "user", content: "hi" }] }
      ]) {
        const response = await postJson(chatUrl(), body)
        expect(response.status).toBe(400)
        const error = (await jsonOf(response)).error
        expectErrorShape({ error }, "invalid_request_error")
        expect(error.message.length, error.message.slice(0, 400)).toBeLessThanOrEqual(300)
        expect(error.message).not.toContain("xxxxxxxxxx")
        expect(error.message).toMatch(/^(messages\[0\]\.role|temperature|model): Expected/)
        expect(error.param).toBe(error.message.split(":")[0])
      }
    })

    it("a body of the wrong shape gets a short 400 saying what was expected, not a schema dump", async () => {
      for (const [body, message] of [
        [{ model: "echo", messages: { role: "user", content: "hi" } }, "messages: Expected array, actual object"],
        [[{ model: "echo" }], "Expected object, actual array"]
      ] as const) {
        const response = await postJson(chatUrl(), body)
        expect(response.status).toBe(400)
        expect((await jsonOf(response)).error.message).toBe(message)
      }
    })

    it("an unknown model is a 404 invalid_request_error / model_not_found (non-stream and stream)", async () => {
      const e = await apiError(client.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "hi" }] }))
      expect(e.status).toBe(404)
      expect(e.type).toBe("invalid_request_error")
      expect(e.code).toBe("model_not_found")

      const s = await apiError(
        client.chat.completions.create({ model: "nope", stream: true, messages: [{ role: "user", content: "hi" }] })
      )
      expect(s.status).toBe(404)
      expect(s.code).toBe("model_not_found")

      const raw = await postJson(chatUrl(), { model: "nope", messages: [{ role: "user", content: "hi" }] })
      expectErrorShape(await jsonOf(raw), "invalid_request_error")
    })

    it("a body over server.maxBodyBytes is a 413 invalid_request_error", async () => {
      const e = await apiError(
        client.chat.completions.create({ model: "echo", messages: [{ role: "user", content: "x".repeat(MAX_BODY + 100) }] })
      )
      expect(e.status).toBe(413)
      expect(e.type).toBe("invalid_request_error")
    })

    it("a chunked body (no Content-Length) over server.maxBodyBytes is a 413 invalid_request_error", async () => {
      const text = JSON.stringify({ model: "echo", messages: [{ role: "user", content: "y".repeat(MAX_BODY * 2) }] })
      const result = await new Promise<{ status: number; body: string } | { error: string }>((resolve) => {
        const request = http.request(
          `${chatUrl()}`,
          { method: "POST", headers: { "content-type": "application/json", "transfer-encoding": "chunked" } },
          (response) => {
            let body = ""
            response.setEncoding("utf8")
            response.on("data", (part: string) => (body += part))
            response.on("end", () => resolve({ status: response.statusCode ?? 0, body }))
            response.on("error", () => resolve({ status: response.statusCode ?? 0, body }))
          }
        )
        // A server may answer early and close while the body is still going out: only a missing response counts.
        request.on("error", (e) => resolve({ error: e.message }))
        for (let i = 0; i < text.length; i += 4096) request.write(text.slice(i, i + 4096))
        request.end()
      })
      expect(result).toMatchObject({ status: 413 })
      if ("body" in result && result.body !== "") expectErrorShape(JSON.parse(result.body), "invalid_request_error")
    })

    it("a body just under the limit is served", async () => {
      const completion = await client.chat.completions.create({
        model: "echo",
        max_tokens: 1,
        messages: [{ role: "user", content: "z".repeat(MAX_BODY - 200) }]
      })
      expect(completion.choices[0]!.finish_reason).toBe("length")
    })

    it("an unknown route is a 404 in the OpenAI error shape", async () => {
      const response = await fetch(`${edge.baseURL}/nothing-here`)
      expect(response.status).toBe(404)
      const body = await jsonOf(response)
      expect(body.error).toBeDefined()
    })
  })

  describe("after the run started", () => {
    it("an upstream 500 fails a non-stream request with 502 run_error", async () => {
      const key = upstream.script("500 json", { kind: "json", status: 500, body: { error: { message: "boom", type: "server_error" } } })
      const e = await apiError(client.chat.completions.create({ model: "up", messages: [{ role: "user", content: key }] }))
      expect(e.status).toBe(502)
      expect(e.type).toBe("run_error")
    })

    it("an unreachable upstream fails a non-stream request with 502 run_error", async () => {
      const e = await apiError(client.chat.completions.create({ model: "dead", messages: [{ role: "user", content: "hi" }] }))
      expect(e.status).toBe(502)
      expect(e.type).toBe("run_error")
    })

    it("an upstream 500 on a stream: 502 run_error before any chunk, or a run_error SSE event then [DONE]", async () => {
      const key = upstream.script("500 stream", { kind: "json", status: 500, body: { error: { message: "boom", type: "server_error" } } })
      const response = await postJson(chatUrl(), { model: "up", stream: true, messages: [{ role: "user", content: key }] })
      if (response.status === 200) {
        expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/)
        expectStreamError(await readSse(response), "run_error")
      } else {
        expect(response.status).toBe(502)
        expectErrorShape(await jsonOf(response), "run_error")
      }
    })

    it("an upstream error event mid-stream becomes one run_error event then [DONE], no finish chunk", async () => {
      const key = upstream.script("error event", {
        kind: "sse",
        events: [chunk({ role: "assistant", content: "" }), chunk({ content: "partial " }), errorEvent("model crashed")],
        done: false
      })
      const response = await postJson(chatUrl(), { model: "up", stream: true, messages: [{ role: "user", content: key }] })
      expect(response.status).toBe(200)
      const sse = await readSse(response)
      expectStreamError(sse, "run_error")
      expect(sse.events.map((e) => e.choices?.[0]?.delta.content ?? "").join("")).toBe("partial ")
    })

    it("an upstream connection reset mid-stream becomes one run_error event then [DONE]", async () => {
      const key = upstream.script("reset", {
        kind: "reset",
        before: [chunk({ role: "assistant", content: "" }), chunk({ content: "Hello" })]
      })
      const response = await postJson(chatUrl(), { model: "up", stream: true, messages: [{ role: "user", content: key }] })
      expect(response.status).toBe(200)
      const sse = await readSse(response)
      expectStreamError(sse, "run_error")
      expect(sse.events[0].choices[0].delta.role).toBe("assistant")
      expect(sse.events.map((e) => e.choices?.[0]?.delta.content ?? "").join("")).toBe("Hello")
    })

    it("an upstream stream that ends without a finish chunk or [DONE] still gets exactly one terminal outcome", async () => {
      const key = upstream.script("truncated", {
        kind: "sse",
        events: [chunk({ role: "assistant", content: "" }), chunk({ content: "Hel" })],
        done: false
      })
      const response = await postJson(chatUrl(), { model: "up", stream: true, messages: [{ role: "user", content: key }] })
      const sse = await readSse(response)
      expectDoneOnce(sse)
      const terminal = sse.events.filter((e) => "error" in e || e.choices?.[0]?.finish_reason != null)
      // Exactly one terminal outcome, whichever it is.
      expect(terminal, sse.raw).toHaveLength(1)
    })

    it("a stalled upstream fails a non-stream request with 504 timeout after runs.idleTimeoutMs, and its upstream request is aborted", async () => {
      const key = upstream.script("stall json", { kind: "stall", before: [chunk({ role: "assistant", content: "" })] })
      const abortedBefore = upstream.aborted.length
      const started = Date.now()
      const e = await apiError(client.chat.completions.create({ model: "up", messages: [{ role: "user", content: key }] }))
      const failedAt = Date.now()
      expect(e.status).toBe(504)
      expect(e.type).toBe("timeout")
      // Not before the idle timeout (a slow machine only makes it later; the upper bound is a TestClock
      // test: test/run/RunService.test.ts).
      expect(failedAt - started).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS - 20)
      await eventually(() => expect(upstream.aborted.length).toBeGreaterThan(abortedBefore))
    })

    it("a stalled upstream fails a started stream with the SSE error `run timed out`, then [DONE]", async () => {
      const key = upstream.script("stall stream", {
        kind: "stall",
        before: [chunk({ role: "assistant", content: "" }), chunk({ content: "Hel" })]
      })
      const abortedBefore = upstream.aborted.length
      const response = await postJson(chatUrl(), { model: "up", stream: true, messages: [{ role: "user", content: key }] })
      expect(response.status).toBe(200)
      const sse = await readSse(response)
      const error = expectStreamError(sse, "run_error")
      expect(error.message).toBe("run timed out")
      expect(sse.events.map((e) => e.choices?.[0]?.delta.content ?? "").join("")).toBe("Hel")
      await eventually(() => expect(upstream.aborted.length).toBeGreaterThan(abortedBefore))
    })

    it("the SDK surfaces a mid-stream error event as an APIError", async () => {
      const key = upstream.script("sdk reset", {
        kind: "reset",
        before: [chunk({ role: "assistant", content: "" }), chunk({ content: "Hello" })]
      })
      const stream = await client.chat.completions.create({ model: "up", stream: true, messages: [{ role: "user", content: key }] })
      let text = ""
      const e = await apiError(
        (async () => {
          for await (const c of stream) text += c.choices[0]?.delta.content ?? ""
        })()
      )
      expect(text).toBe("Hello")
      expect(e.type).toBe("run_error")
    })
  })

  it("/metrics counts chat requests by model and outcome (success, error, timeout)", async () => {
    const labels = (outcome: string) => ({ model: "up", outcome })
    // The earlier tests' responses are counted as their scopes close, which their clients do not wait for.
    await eventually(async () => expect(metricSum(await fetchMetrics(edge.url), "iop_active_streams")).toBe(0))
    const before = await fetchMetrics(edge.url)
    const count = (text: string, outcome: string) => metricSum(text, "iop_chat_requests_total", labels(outcome))

    const ok = upstream.script("metrics ok", { kind: "sse", events: textStream(["fine"]) })
    const bad = upstream.script("metrics bad", { kind: "json", status: 500, body: { error: { message: "no", type: "server_error" } } })
    const slow = upstream.script("metrics slow", { kind: "stall" })
    await client.chat.completions.create({ model: "up", messages: [{ role: "user", content: ok }] })
    await client.chat.completions.create({ model: "up", messages: [{ role: "user", content: ok }] })
    await apiError(client.chat.completions.create({ model: "up", messages: [{ role: "user", content: bad }] }))
    await apiError(client.chat.completions.create({ model: "up", messages: [{ role: "user", content: slow }] }))
    const sse = await readSse(await postJson(chatUrl(), { model: "up", stream: true, messages: [{ role: "user", content: ok }] }))
    expectDoneOnce(sse)

    await eventually(async () => {
      const after = await fetchMetrics(edge.url)
      expect(after).toMatch(/^iop_chat_requests_total\{[^}]*model="up"[^}]*outcome="success"[^}]*\} \d+/m)
      expect(count(after, "success") - count(before, "success")).toBe(3)
      expect(count(after, "error") - count(before, "error")).toBe(1)
      expect(count(after, "timeout") - count(before, "timeout")).toBe(1)
    })
  })
})
