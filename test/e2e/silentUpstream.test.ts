import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { chunk, frame } from "../support/fakeUpstream.js"

/**
 * An upstream that answers 200 and its role chunk, then says nothing (a long prefill): the client gets its status,
 * headers and the API's opening event while the upstream is still silent, not a first byte at the first token.
 */
describe("a silent upstream after its 200", () => {
  let edge: EdgeProcess
  let server: http.Server
  const open: Array<http.ServerResponse> = []

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.write(frame(chunk({ role: "assistant", content: "" })))
        open.push(res)
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
    edge = await startEdge({ config: { models: [{ id: "slow", provider: { type: "openai", baseUrl: url, model: "s" } }] } })
  })
  afterAll(async () => {
    await edge?.stop()
    server?.closeAllConnections()
    await new Promise<void>((resolve) => server?.close(() => resolve()))
  })

  const cases = [
    { path: "/chat/completions", body: { messages: [{ role: "user", content: "hi" }] }, opening: `"role":"assistant"` },
    { path: "/responses", body: { input: "hi" }, opening: "response.created" },
    { path: "/messages", body: { max_tokens: 16, messages: [{ role: "user", content: "hi" }] }, opening: "message_start" }
  ]
  for (const c of cases) {
    it(`${c.path}: status, headers and the opening event before any token`, async () => {
      const controller = new AbortController()
      const response = await fetch(`${edge.baseURL}${c.path}`, {
        method: "POST",
        headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" },
        body: JSON.stringify({ model: "slow", stream: true, ...c.body }),
        signal: controller.signal
      })
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toContain("text/event-stream")
      const reader = response.body!.getReader()
      const first = await reader.read()
      expect(new TextDecoder().decode(first.value)).toContain(c.opening)
      controller.abort()
    })
  }
})
