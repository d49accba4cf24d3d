import * as http from "node:http"
import * as net from "node:net"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually, fetchMetrics, metricSum } from "../support/e2e.js"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { chunk, frame } from "../support/fakeUpstream.js"
import { type NatsServer, startNatsServer } from "../support/natsServer.js"
import { type NodeProcess, startNode } from "../support/nodeProcess.js"

/**
 * Clients that stop reading without closing, against the built edge and a real socket: each one's upstream
 * request is aborted and its slot released once the run made no progress for `runs.idleTimeoutMs` (kept short
 * here; TestClock tests in test/run prove the timing). The upstream streams as fast as its socket takes bytes,
 * forever, so only the edge giving up on the stalled client can close its request.
 */

interface FloodUpstream {
  readonly url: string
  readonly open: () => number
  readonly closed: () => number
  readonly close: () => Promise<void>
}

const startFlood = async (): Promise<FloodUpstream> => {
  let open = 0
  let closed = 0
  const token = frame(chunk({ content: "lorem ipsum dolor sit amet " }))
  const burst = token.repeat(64)
  const server = http.createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      open++
      res.on("close", () => {
        open--
        closed++
      })
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write(frame(chunk({ role: "assistant", content: "" })))
      const pump = (): void => {
        while (!res.destroyed && res.write(burst));
        if (!res.destroyed) res.once("drain", pump)
      }
      pump()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    open: () => open,
    closed: () => closed,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
  }
}

/** Opens a stream on a raw socket, waits for its first bytes, then stops reading (the socket stays open). */
const stalledClient = (port: number, path: string, body: object) =>
  new Promise<{ readonly socket: net.Socket; readonly first: string }>((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1")
    const json = JSON.stringify(body)
    socket.on("error", reject)
    socket.once("data", (bytes) => {
      socket.pause()
      resolve({ socket, first: bytes.toString("utf8") })
    })
    socket.write(
      `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n` +
        `anthropic-version: 2023-06-01\r\ncontent-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`
    )
  })

const messages = [{ role: "user", content: "go" }]

/** `n` stalled clients, over the three APIs in turn. */
const stallClients = (port: number, n: number) =>
  Promise.all(
    Array.from({ length: n }, (_, i) => {
      switch (i % 3) {
        case 0:
          return stalledClient(port, "/v1/chat/completions", { model: "flood", stream: true, messages })
        case 1:
          return stalledClient(port, "/v1/responses", { model: "flood", stream: true, input: "go" })
        default:
          return stalledClient(port, "/v1/messages", { model: "flood", stream: true, max_tokens: 64, messages })
      }
    })
  )

/** The edge closed the stalled connections: a client that reads again gets what its socket held, then the end. */
const closedByEdge = (clients: ReadonlyArray<{ readonly socket: net.Socket }>) =>
  Promise.all(clients.map((c) =>
    new Promise<void>((resolve) => {
      c.socket.on("close", () => resolve())
      c.socket.on("data", () => undefined)
      c.socket.resume()
    })
  ))

const residentBytes = async (url: string) => metricSum(await fetchMetrics(url), "process_resident_memory_bytes")

describe("a client that stops reading holds nothing", () => {
  let upstream: FloodUpstream
  let edge: EdgeProcess

  beforeAll(async () => {
    upstream = await startFlood()
    edge = await startEdge({
      config: {
        // Short, yet long enough for a busy machine to open 12 streams before any of them idles out.
        runs: { idleTimeoutMs: 1_500 },
        models: [{ id: "flood", provider: { type: "openai", baseUrl: upstream.url, model: "f" } }]
      }
    })
  })
  afterAll(async () => {
    await edge?.stop()
    await upstream?.close()
  })

  it("12 stalled streams (all three APIs): every upstream request aborted, every slot released, the edge still serves", async () => {
    const clients = await stallClients(edge.port, 12)
    for (const c of clients) expect(c.first).toMatch(/^HTTP\/1\.1 200/)
    await eventually(() => {
      expect(upstream.closed()).toBe(12)
      expect(upstream.open()).toBe(0)
    })
    // Each request is counted when it ends, after its run: its stalled connection may take a moment more.
    await eventually(async () => {
      const metrics = await fetchMetrics(edge.url)
      expect(metricSum(metrics, "iop_chat_requests_total", { model: "flood", outcome: "cancelled" })).toBe(12)
    })
    await closedByEdge(clients)
    // And the edge serves on: a client that reads gets its stream.
    const controller = new AbortController()
    const response = await fetch(`${edge.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "flood", stream: true, messages }),
      signal: controller.signal
    })
    expect(response.status).toBe(200)
    const reader = response.body!.getReader()
    expect((await reader.read()).done).toBe(false)
    controller.abort()
  })
})

describe("a client that stops reading holds nothing, through a NATS node", () => {
  let upstream: FloodUpstream
  let nats: NatsServer
  let node: NodeProcess
  let edge: EdgeProcess

  beforeAll(async () => {
    upstream = await startFlood()
    nats = await startNatsServer()
    const bus = { nats: { servers: [nats.url] }, nodeTimeoutMs: 2_000 }
    node = await startNode({
      node: { id: "flood-node", maxConcurrentRuns: 16 },
      bus,
      models: [{ id: "flood", provider: { type: "openai", baseUrl: upstream.url, model: "f" } }]
    })
    edge = await startEdge({ config: { bus, runs: { idleTimeoutMs: 1_000 }, models: [] } })
    await eventually(async () => {
      const models = await (await fetch(`${edge.baseURL}/models`)).json() as { data: Array<{ id: string }> }
      expect(models.data.map((m) => m.id)).toContain("flood")
    })
  })
  afterAll(async () => {
    await edge?.stop()
    await node?.stop()
    await nats?.stop()
    await upstream?.close()
  })

  it("12 stalled streams: every upstream request aborted, the edge's memory bounded (the node paused by credits)", async () => {
    const before = await residentBytes(edge.url)
    const clients = await stallClients(edge.port, 12)
    for (const c of clients) expect(c.first).toMatch(/^HTTP\/1\.1 200/)
    await eventually(() => {
      expect(upstream.closed()).toBe(12)
      expect(upstream.open()).toBe(0)
    })
    // Without flow control the edge buffered everything the upstreams wrote (+260 MiB for 12 readers, measured);
    // with it, each stalled run holds a credit window (256 KiB) and the channel's high-water mark.
    const grown = (await residentBytes(edge.url)) - before
    expect(grown).toBeLessThan(96 * 1024 * 1024)
    await eventually(async () =>
      expect(metricSum(await fetchMetrics(edge.url), "iop_chat_requests_total", { model: "flood", outcome: "cancelled" })).toBe(12))
    await closedByEdge(clients)
  })
})
