import { connect as natsConnect } from "@nats-io/transport-node"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { eventually, expectDoneOnce, jsonOf, parseSse, postJson, readSse, sleep, type SseResult, sseReader, untilContent } from "../support/e2e.js"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import {
  chunk,
  completionTokens,
  FAKE_MODEL,
  type FakeUpstream,
  startFakeUpstream,
  textStream,
  usageChunk
} from "../support/fakeUpstream.js"
import { type NatsServer, startNatsServer } from "../support/natsServer.js"
import { type NodeProcess, startNode } from "../support/nodeProcess.js"

/**
 * `iop edge` and `iop node` as separate processes over a real nats-server:
 * dispatch through the official SDK, cancellation, node loss, failover, load
 * across two edges and three nodes, NATS restart, node SIGTERM.
 */

const NODE_TIMEOUT_MS = 800

const busOf = (nats: NatsServer, nodeTimeoutMs = NODE_TIMEOUT_MS) => ({ nats: { servers: [nats.url] }, nodeTimeoutMs })

const nodeConfig = (nats: NatsServer, id: string, models: ReadonlyArray<object>, maxConcurrentRuns = 8, extra: object = {}) => ({
  node: { id, maxConcurrentRuns },
  bus: busOf(nats),
  models,
  ...extra
})

const edgeConfig = (nats: NatsServer) => ({ bus: busOf(nats), models: [] })

const echoModel = (id = "echo", tokenDelayMs = 0) => ({ id, provider: { type: "echo", tokenDelayMs } })
const upModel = (id: string, upstream: FakeUpstream) => ({ id, provider: { type: "openai", baseUrl: upstream.url, model: FAKE_MODEL } })

const modelIds = async (edge: EdgeProcess): Promise<Array<string>> => {
  const response = await fetch(`${edge.baseURL}/models`)
  expect(response.status).toBe(200)
  return ((await jsonOf(response)).data as Array<{ id: string }>).map((m) => m.id)
}

const waitForModels = (edge: EdgeProcess, ids: ReadonlyArray<string>, timeoutMs = 10_000) =>
  eventually(async () => expect(await modelIds(edge)).toEqual(expect.arrayContaining([...ids])), timeoutMs, 50)

const lastUser = (body: any): string => {
  const messages = (body?.messages ?? []) as Array<{ role: string; content: unknown }>
  const last = [...messages].reverse().find((m) => m.role === "user")
  return typeof last?.content === "string" ? last.content : JSON.stringify(last?.content ?? "")
}

const errorsOf = (sse: SseResult) => sse.events.filter((e) => e.error !== undefined).map((e) => e.error)
const contentOf = (sse: SseResult) =>
  sse.events.filter((e) => e.error === undefined).map((e) => e.choices?.[0]?.delta?.content ?? "").join("")

const chatStream = (edge: EdgeProcess, model: string, content: string, signal?: AbortSignal) =>
  postJson(`${edge.baseURL}/chat/completions`, { model, stream: true, messages: [{ role: "user", content }] }, {}, signal)

const TOOL_CALL_EVENTS = [
  chunk({ role: "assistant", content: "" }),
  chunk({ tool_calls: [{ index: 0, id: "call_up_1", type: "function", function: { name: "get_weather", arguments: "" } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: "{\"city\": " } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: "\"Paris\"}" } }] }),
  chunk({ finish_reason: "tool_calls" }),
  usageChunk(completionTokens(11, 7))
]

const WEATHER_TOOL = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
  }
}

// ---------------------------------------------------------------------------

describe("dispatch over NATS through the openai SDK", () => {
  let nats: NatsServer
  let upstream: FakeUpstream
  let node: NodeProcess
  let edge: EdgeProcess
  let client: OpenAI

  beforeAll(async () => {
    nats = await startNatsServer()
    upstream = await startFakeUpstream((request) => {
      const text = lastUser(request.body)
      if (text.startsWith("tool")) return { kind: "sse", events: TOOL_CALL_EVENTS }
      if (text.startsWith("slow")) {
        return { kind: "sse", delayMs: 100, events: textStream(Array.from({ length: 100 }, (_, i) => `t${i} `)) }
      }
      return { kind: "sse", events: textStream(["Hello", ", ", "world"], { usage: completionTokens(5, 3) }) }
    })
    ;[node, edge] = await Promise.all([
      startNode(nodeConfig(nats, "gpu-1", [echoModel("echo", 0), upModel("up", upstream)])),
      startEdge({ config: edgeConfig(nats) })
    ])
    client = new OpenAI({ baseURL: edge.baseURL, apiKey: "x", maxRetries: 0 })
    await waitForModels(edge, ["echo", "up"])
  })
  afterAll(async () => {
    await edge?.stop()
    await node?.stop()
    await upstream?.close()
    await nats?.stop()
  })

  it("echo on a node: stream and non-stream via the SDK", async () => {
    const text = "Hello over NATS, from a node on another machine."
    const stream = await client.chat.completions.create({ model: "echo", stream: true, messages: [{ role: "user", content: text }] })
    const chunks: Array<OpenAI.Chat.Completions.ChatCompletionChunk> = []
    for await (const c of stream) chunks.push(c)
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant")
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe(text)
    expect(chunks[chunks.length - 1]!.choices[0]!.finish_reason).toBe("stop")
    expect(chunks.every((c) => c.model === "echo")).toBe(true)

    const completion = await client.chat.completions.create({ model: "echo", messages: [{ role: "user", content: text }] })
    expect(completion.object).toBe("chat.completion")
    expect(completion.choices[0]!.message.content).toBe(text)
    expect(completion.choices[0]!.finish_reason).toBe("stop")
  })

  it("fake upstream behind a node: content and usage pass through, stream and non-stream", async () => {
    const completion = await client.chat.completions.create({ model: "up", messages: [{ role: "user", content: "hi" }] })
    expect(completion.choices[0]!.message.content).toBe("Hello, world")
    expect(completion.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 })

    const stream = await client.chat.completions.create({
      model: "up",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "hi" }]
    })
    const chunks: Array<OpenAI.Chat.Completions.ChatCompletionChunk> = []
    for await (const c of stream) chunks.push(c)
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("Hello, world")
    const last = chunks[chunks.length - 1]!
    expect(last.choices).toEqual([])
    expect(last.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 })
  })

  it("a native tool call from the upstream passes through the node (stream and non-stream)", async () => {
    const completion = await client.chat.completions.create({
      model: "up",
      tools: [WEATHER_TOOL],
      messages: [{ role: "user", content: "tool please" }]
    })
    const choice = completion.choices[0]!
    expect(choice.finish_reason).toBe("tool_calls")
    expect(choice.message.tool_calls).toHaveLength(1)
    const call = choice.message.tool_calls![0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall
    expect(call.type).toBe("function")
    expect(call.function.name).toBe("get_weather")
    expect(JSON.parse(call.function.arguments)).toEqual({ city: "Paris" })
    expect(completion.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7 })

    const stream = await client.chat.completions.create({
      model: "up",
      stream: true,
      stream_options: { include_usage: true },
      tools: [WEATHER_TOOL],
      messages: [{ role: "user", content: "tool please" }]
    })
    const chunks: Array<OpenAI.Chat.Completions.ChatCompletionChunk> = []
    for await (const c of stream) chunks.push(c)
    const withCalls = chunks.filter((c) => c.choices[0]?.delta.tool_calls !== undefined)
    expect(withCalls).toHaveLength(1)
    const delta = withCalls[0]!.choices[0]!.delta.tool_calls![0]!
    expect(delta.function?.name).toBe("get_weather")
    expect(JSON.parse(delta.function?.arguments ?? "")).toEqual({ city: "Paris" })
    expect(chunks.find((c) => c.choices[0]?.finish_reason !== null && c.choices[0]?.finish_reason !== undefined)?.choices[0]!.finish_reason)
      .toBe("tool_calls")
    expect(chunks[chunks.length - 1]!.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7 })
  })

  it("a client that aborts its fetch gets the node's upstream request aborted within 1 s", async () => {
    const abortedBefore = upstream.aborted.length
    const controller = new AbortController()
    const response = await chatStream(edge, "up", "slow stream", controller.signal)
    expect(response.status).toBe(200)
    const reader = sseReader(response)
    await untilContent(reader)
    const abortAt = Date.now()
    controller.abort()
    const at = await eventually(() => {
      expect(upstream.aborted.length).toBeGreaterThan(abortedBefore)
      return upstream.aborted[abortedBefore]!.at
    }, 3_000)
    expect(at - abortAt).toBeLessThan(1_000)
  })
})

// ---------------------------------------------------------------------------

describe("a node killed mid-run (SIGKILL)", () => {
  let nats: NatsServer
  let node: NodeProcess
  let edge: EdgeProcess

  beforeAll(async () => {
    nats = await startNatsServer()
    ;[node, edge] = await Promise.all([
      startNode(nodeConfig(nats, "doomed", [echoModel("slow-echo", 50)])),
      startEdge({ config: edgeConfig(nats) })
    ])
    await waitForModels(edge, ["slow-echo"])
  })
  afterAll(async () => {
    await edge?.stop()
    await node?.stop("SIGKILL")
    await nats?.stop()
  })

  it("the client gets one run_error `node disconnected` then [DONE] within nodeTimeoutMs + 1 s; the model goes away", async () => {
    const text = Array.from({ length: 200 }, (_, i) => `w${i}`).join(" ")
    const response = await chatStream(edge, "slow-echo", text)
    expect(response.status).toBe(200)
    const reader = sseReader(response)
    await untilContent(reader)
    const killedAt = Date.now()
    await node.stop("SIGKILL")
    const raw = await reader.rest()
    const endedAt = Date.now()
    expect(endedAt - killedAt).toBeLessThan(NODE_TIMEOUT_MS + 1_000)
    const sse = parseSse(raw)
    expectDoneOnce(sse)
    const errors = errorsOf(sse)
    expect(errors).toHaveLength(1)
    expect(errors[0]).toMatchObject({ type: "run_error", message: "node disconnected" })
    // The error event is the last event before [DONE], and no finish chunk came.
    expect(sse.events[sse.events.length - 1].error).toBeDefined()
    expect(sse.events.some((e) => e.choices?.[0]?.finish_reason)).toBe(false)

    await eventually(async () => expect(await modelIds(edge)).not.toContain("slow-echo"), 5_000, 50)
  })
})

// ---------------------------------------------------------------------------

describe("failover between two nodes serving the same model", () => {
  let nats: NatsServer
  let upA: FakeUpstream
  let upB: FakeUpstream
  let nodeA: NodeProcess
  let nodeB: NodeProcess | undefined
  let edge: EdgeProcess
  let edge2: EdgeProcess | undefined

  beforeAll(async () => {
    nats = await startNatsServer()
    upA = await startFakeUpstream((request) =>
      lastUser(request.body).startsWith("long")
        ? { kind: "sse", delayMs: 100, events: textStream(Array.from({ length: 60 }, (_, i) => `a${i} `)) }
        : { kind: "sse", events: textStream(["from A"]) }
    )
    upB = await startFakeUpstream({ kind: "sse", events: textStream(["from B"]) })
    ;[nodeA, edge] = await Promise.all([
      startNode(nodeConfig(nats, "busy-a", [upModel("shared", upA)], 1)),
      startEdge({ config: edgeConfig(nats) })
    ])
    await waitForModels(edge, ["shared"])
  })
  afterAll(async () => {
    await edge?.stop()
    await edge2?.stop()
    await nodeA?.stop()
    await nodeB?.stop()
    await upA?.close()
    await upB?.close()
    await nats?.stop()
  })

  it("with node A (maxConcurrentRuns 1) busy on a long run, new requests are served by node B", async () => {
    const controller = new AbortController()
    const long = await chatStream(edge, "shared", "long run", controller.signal)
    expect(long.status).toBe(200)
    const longReader = sseReader(long)
    await untilContent(longReader)
    expect(upA.requests).toHaveLength(1)

    nodeB = await startNode(nodeConfig(nats, "free-b", [upModel("shared", upB)], 4))
    // The edge has heard of node B.
    await eventually(() => expect(edge.stdout()).toMatch(/"message":"node joined".*free-b|free-b.*"message":"node joined"/), 10_000, 50)
    // A second edge that never submitted to A (it only knows A's load from announcements, or from A's refusal).
    edge2 = await startEdge({ config: edgeConfig(nats) })
    await eventually(() => expect(edge2!.stdout()).toMatch(/busy-a/), 10_000, 50)
    await eventually(() => expect(edge2!.stdout()).toMatch(/free-b/), 10_000, 50)

    for (const e of [edge, edge2, edge, edge2]) {
      const sse = await readSse(await chatStream(e, "shared", "short"))
      expectDoneOnce(sse)
      expect(errorsOf(sse)).toEqual([])
      expect(contentOf(sse)).toBe("from B")
    }
    expect(upA.requests).toHaveLength(1)
    expect(upB.requests).toHaveLength(4)

    // The long run on A is unaffected.
    controller.abort()
  })
})

// ---------------------------------------------------------------------------

describe("two edges × three nodes, 200 concurrent streams", () => {
  let nats: NatsServer
  let nodes: Array<NodeProcess> = []
  let edges: Array<EdgeProcess> = []
  const MAX = 40
  // The brief's ~800 ms; IOP_E2E_LOAD_NODE_TIMEOUT_MS to compare with a more tolerant timeout.
  const TIMEOUT = Number(process.env["IOP_E2E_LOAD_NODE_TIMEOUT_MS"] ?? "") || NODE_TIMEOUT_MS

  beforeAll(async () => {
    nats = await startNatsServer()
    const started = await Promise.all([
      startNode(nodeConfig(nats, "load-1", [echoModel("echo", 5)], MAX, { bus: busOf(nats, TIMEOUT) })),
      startNode(nodeConfig(nats, "load-2", [echoModel("echo", 5)], MAX, { bus: busOf(nats, TIMEOUT) })),
      startNode(nodeConfig(nats, "load-3", [echoModel("echo", 5)], MAX, { bus: busOf(nats, TIMEOUT) })),
      startEdge({ config: { ...edgeConfig(nats), bus: busOf(nats, TIMEOUT) } }),
      startEdge({ config: { ...edgeConfig(nats), bus: busOf(nats, TIMEOUT) } })
    ])
    nodes = started.slice(0, 3) as Array<NodeProcess>
    edges = started.slice(3) as Array<EdgeProcess>
    for (const edge of edges) {
      await waitForModels(edge, ["echo"])
      await eventually(() => {
        for (const id of ["load-1", "load-2", "load-3"]) expect(edge.stdout()).toContain(id)
      }, 10_000, 50)
    }
  })
  afterAll(async () => {
    for (const e of edges) await e.stop()
    for (const n of nodes) await n.stop()
    await nats?.stop()
  })

  it("every response is well formed: echo content and [DONE] once, or a clean error", async () => {
    const N = 200
    // Watch the nodes' announcements: each carries inFlight and maxConcurrentRuns (a sampled capacity check),
    // and the gaps between them show how late heartbeats get under this load.
    const watcher = await natsConnect({ servers: [nats.url] })
    const seen = new Map<string, { last: number; maxGap: number; maxInFlight: number; max: number }>()
    const sub = watcher.subscribe("iop.nodes.announce")
    void (async () => {
      for await (const msg of sub) {
        const a = JSON.parse(new TextDecoder().decode(msg.data))
        const now = Date.now()
        const prev = seen.get(a.nodeId)
        seen.set(a.nodeId, {
          last: now,
          maxGap: prev === undefined ? 0 : Math.max(prev.maxGap, now - prev.last),
          maxInFlight: Math.max(prev?.maxInFlight ?? 0, a.inFlight),
          max: a.maxConcurrentRuns
        })
      }
    })()
    // Let the just-started processes settle (see the report: with no settling, a cold start under this load on a
    // 2-core machine can make the edges declare live nodes gone). IOP_E2E_LOAD_SETTLE_MS=0 reproduces it.
    await sleep(Number(process.env["IOP_E2E_LOAD_SETTLE_MS"] ?? 3 * TIMEOUT))
    const startedAt = Date.now()
    const results = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const edge = edges[i % 2]!
        const text = `message ${i} says hello`
        const response = await chatStream(edge, "echo", text)
        const body = await response.text()
        return { i, text, status: response.status, body }
      })
    )
    const elapsed = Date.now() - startedAt
    await sleep(TIMEOUT)
    await sub.drain()
    await watcher.close()
    console.log(`200 streams took ${elapsed} ms; announcements seen by a NATS watcher:`, Object.fromEntries(seen))
    let ok = 0
    const failures: Array<string> = []
    const notClean: Array<string> = []
    for (const r of results) {
      if (r.status === 200) {
        const sse = parseSse(r.body)
        expectDoneOnce(sse)
        const errors = errorsOf(sse)
        if (errors.length === 0) {
          expect(contentOf(sse)).toBe(r.text)
          expect(sse.events.filter((e) => e.choices?.[0]?.finish_reason)).toHaveLength(1)
          ok++
        } else {
          // A failure after the stream started: exactly one run_error event, last before [DONE].
          expect(errors).toHaveLength(1)
          expect(errors[0].type).toBe("run_error")
          expect(sse.events[sse.events.length - 1].error).toBeDefined()
          failures.push(`#${r.i} 200+${errors[0].type}: ${errors[0].message}`)
        }
      } else {
        // Before the stream started: a clean OpenAI error body (502 run_error / 503 service_unavailable).
        const body = JSON.parse(r.body)
        failures.push(`#${r.i} ${r.status} ${body.error?.type}: ${body.error?.message}`)
        notClean.push(...([502, 503].includes(r.status) && ["run_error", "service_unavailable"].includes(body.error?.type)
          ? []
          : [`#${r.i} ${r.status} ${r.body.slice(0, 200)}`]))
      }
    }
    console.log(`200 streams over 2 edges × 3 nodes: ${ok} ok, ${failures.length} failed`, failures.slice(0, 5))
    expect(ok + failures.length).toBe(N)
    const byKind = new Map<string, number>()
    for (const f of failures) {
      const kind = `${Number(f.slice(1, f.indexOf(" "))) % 2 === 0 ? "edge0" : "edge1"} ${f.slice(f.indexOf(" ") + 1)}`
      byKind.set(kind, (byKind.get(kind) ?? 0) + 1)
    }
    console.log("failures by edge and kind:", Object.fromEntries(byKind))
    if (failures.length > 0) {
      const notable = (text: string) =>
        text.split("\n").filter((l) => /"logLevel":"(WARN|ERROR)|node (joined|left|missed|restarted)|NATS/.test(l)).slice(0, 15)
      edges.forEach((e, k) => console.log(`edge ${k} log:`, notable(e.stdout())))
      nodes.forEach((n, k) => console.log(`node ${k} log:`, notable(n.stdout())))
    }
    // The contract says refusals are retried on other nodes; with 3 × 40 slots and short runs all should pass.
    expect(notClean, "every failure is a clean 502/503 or run_error").toEqual([])
    expect(failures).toEqual([])
    // No node ever announced more runs in flight than its maxConcurrentRuns (sampled every nodeTimeoutMs / 3).
    expect(seen.size).toBe(3)
    for (const [, v] of seen) expect(v.maxInFlight).toBeLessThanOrEqual(MAX)
    // Every node is still up.
    for (const n of nodes) expect(n.proc.exitCode).toBeNull()
  }, 40_000)
})

// ---------------------------------------------------------------------------

describe("NATS server restart mid-run", () => {
  let nats: NatsServer
  let node: NodeProcess
  let edge: EdgeProcess

  beforeAll(async () => {
    nats = await startNatsServer()
    ;[node, edge] = await Promise.all([
      startNode(nodeConfig(nats, "survivor", [echoModel("slow-echo", 30)])),
      startEdge({ config: edgeConfig(nats) })
    ])
    await waitForModels(edge, ["slow-echo"])
  })
  afterAll(async () => {
    await edge?.stop()
    await node?.stop()
    await nats?.stop()
  })

  it("the affected run fails cleanly (one error event, [DONE]); a new run works after reconnection", async () => {
    const text = Array.from({ length: 200 }, (_, i) => `w${i}`).join(" ")
    const response = await chatStream(edge, "slow-echo", text)
    expect(response.status).toBe(200)
    const reader = sseReader(response)
    await untilContent(reader)
    // Down for longer than nodeTimeoutMs: the edge cannot hear the node.
    const restarting = nats.restart(2 * NODE_TIMEOUT_MS)
    const raw = await reader.rest()
    await restarting
    const sse = parseSse(raw)
    expectDoneOnce(sse)
    const errors = errorsOf(sse)
    expect(errors).toHaveLength(1)
    expect(errors[0].type).toBe("run_error")
    expect(sse.events[sse.events.length - 1].error).toBeDefined()

    await eventually(async () => {
      const again = await readSse(await chatStream(edge, "slow-echo", "back again"))
      expectDoneOnce(again)
      expect(errorsOf(again)).toEqual([])
      expect(contentOf(again)).toBe("back again")
    }, 15_000, 250)
    expect(node.proc.exitCode).toBeNull()
  }, 30_000)
})

// ---------------------------------------------------------------------------

describe("SIGTERM on a node with an open stream", () => {
  let nats: NatsServer
  let node: NodeProcess
  let edge: EdgeProcess

  beforeAll(async () => {
    nats = await startNatsServer()
    ;[node, edge] = await Promise.all([
      startNode(nodeConfig(nats, "leaving", [echoModel("slow-echo", 20)], 8, { server: { shutdownGraceMs: 5_000 } })),
      startEdge({ config: edgeConfig(nats) })
    ])
    await waitForModels(edge, ["slow-echo"])
  })
  afterAll(async () => {
    await edge?.stop()
    await node?.stop("SIGKILL")
    await nats?.stop()
  })

  it("the stream finishes (or ends with one run_error) and the node exits 0", async () => {
    const text = Array.from({ length: 40 }, (_, i) => `w${i}`).join(" ")
    const response = await chatStream(edge, "slow-echo", text)
    expect(response.status).toBe(200)
    const reader = sseReader(response)
    await untilContent(reader)
    const code = node.stop("SIGTERM")
    const raw = await reader.rest()
    expect(await code).toBe(0)
    const sse = parseSse(raw)
    expectDoneOnce(sse)
    const errors = errorsOf(sse)
    if (errors.length === 0) {
      expect(contentOf(sse)).toBe(text)
      expect(sse.events.filter((e) => e.choices?.[0]?.finish_reason)).toHaveLength(1)
    } else {
      expect(errors).toHaveLength(1)
      expect(errors[0].type).toBe("run_error")
    }
    // Running runs finish within the grace period: with 5 s of grace this one should have completed.
    expect(errors).toEqual([])
    await eventually(async () => expect(await modelIds(edge)).not.toContain("slow-echo"), 5_000, 50)
  }, 20_000)
})
