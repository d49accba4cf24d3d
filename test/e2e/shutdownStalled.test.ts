import { connect } from "node:net"
import { afterAll, describe, expect, it } from "vitest"
import { startEdge, type EdgeProcess } from "../support/edgeProcess.js"
import { type FakeUpstream, chunk, startFakeUpstream } from "../support/fakeUpstream.js"

/**
 * Cancellation never waits on a client: clients that sent their request and then stopped reading (their socket
 * buffers full, the edge's writes blocked) must not hold shutdown past the grace period.
 */
describe("shutdown with clients that stopped reading", () => {
  const edges: Array<EdgeProcess> = []
  const fakes: Array<FakeUpstream> = []
  afterAll(async () => {
    await Promise.all(edges.map((edge) => edge.stop("SIGKILL")))
    await Promise.all(fakes.map((fake) => fake.close()))
  })

  it("SIGTERM with 20 stalled readers behind a flooding upstream: exit 0 within shutdownGraceMs + a bound", async () => {
    // Megabytes of content at once, then the connection held open: the readers' buffers fill, then nothing comes.
    const big = "x".repeat(64 * 1024)
    const fake = await startFakeUpstream({ kind: "stall", before: Array.from({ length: 64 }, () => chunk({ content: big })) })
    fakes.push(fake)
    const graceMs = 500
    const edge = await startEdge({
      config: {
        server: { shutdownGraceMs: graceMs },
        models: [{ id: "flood", provider: { type: "openai", baseUrl: fake.url, model: "flood" } }]
      }
    })
    edges.push(edge)
    const body = JSON.stringify({ model: "flood", stream: true, messages: [{ role: "user", content: "go" }] })
    const sockets = Array.from({ length: 20 }, () => {
      const socket = connect(edge.port, "127.0.0.1")
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${
          Buffer.byteLength(body)
        }\r\n\r\n${body}`
      )
      // Never read: the kernel buffers fill and the edge's writes block.
      socket.pause()
      socket.on("error", () => undefined)
      return socket
    })
    // Every request reached the upstream: the edge is streaming into full buffers.
    while (fake.requests.length < sockets.length) await new Promise((r) => setTimeout(r, 20))
    const signalledAt = performance.now()
    const code = await edge.stop("SIGTERM")
    const tookMs = performance.now() - signalledAt
    for (const socket of sockets) socket.destroy()
    expect(code).toBe(0)
    // The contract's bound is shutdownGraceMs + 1 s; the margin is for a busy machine, not for the edge.
    expect(tookMs).toBeLessThan(graceMs + 1_000 + 2_000)
    // The upstream requests were aborted, not left running.
    expect(fake.aborted.length).toBe(sockets.length)
  }, 60_000)
})
