import { connect as natsConnect } from "@nats-io/transport-node"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  eventually,
  expectDoneOnce,
  type GatedUpstream,
  jsonOf,
  parseSse,
  postJson,
  readSse,
  type SseResult,
  sseReader,
  startGatedUpstream,
  untilContent
} from "../support/e2e.js"
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
 * across two edges and three nodes, node SIGTERM, NATS restart.
 *
 * One nats-server and one edge serve the whole file (a second edge joins for
 * failover and load); each scenario starts the nodes it needs, under node and
 * model ids of its own. NATS restart runs last. Nothing waits against the
 * clock: every step waits for its event (a log line, an announcement on the
 * bus, the end of a stream), with vitest's timeouts as the hang guard.
 *
 * IOP_E2E_NODE_TIMEOUT_MS (default 2000): `bus.nodeTimeoutMs` of every process.
 * It is also the edge's wait for a node's reply to a run: 2 s rather than the
 * brief's ~800 ms, so that a node starved of CPU on a busy 2-core machine is
 * not taken for gone (how soon a silent node is given up is not what these
 * tests check; the NATS transport's own tests do).
 */

const NODE_TIMEOUT_MS = Number(process.env["IOP_E2E_NODE_TIMEOUT_MS"] ?? "") || 2_000

const busOf = (nats: NatsServer) => ({ nats: { servers: [nats.url] }, nodeTimeoutMs: NODE_TIMEOUT_MS })

const nodeConfig = (nats: NatsServer, id: string, models: ReadonlyArray<object>, maxConcurrentRuns = 8, extra: object = {}) => ({
  node: { id, maxConcurrentRuns },
  bus: busOf(nats),
  models,
  ...extra
})

const edgeConfig = (nats: NatsServer) => ({ bus: busOf(nats), models: [] })

const echoModelConfig = (id: string, tokenDelayMs = 0) => ({ id, provider: { type: "echo", tokenDelayMs } })
const upModel = (id: string, upstream: { readonly url: string }) => ({ id, provider: { type: "openai", baseUrl: upstream.url, model: FAKE_MODEL } })

const modelIds = async (edge: EdgeProcess): Promise<Array<string>> => {
  const response = await fetch(`${edge.baseURL}/models`)
  expect(response.status).toBe(200)
  return ((await jsonOf(response)).data as Array<{ id: string }>).map((m) => m.id)
}

const waitForModels = (edge: EdgeProcess, ids: ReadonlyArray<string>) =>
  eventually(async () => expect(await modelIds(edge)).toEqual(expect.arrayContaining([...ids])), 50)

/** The edge logged that it has heard of node `id`. */
const waitForNode = (edge: EdgeProcess, id: string) =>
  eventually(() => expect(edge.stdout()).toMatch(new RegExp(`"message":"node joined".*"${id}"|"${id}".*"message":"node joined"`)), 50)

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

const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(" ")

/** A stream that sends its first tokens and then nothing, until its client leaves. */
const stallAfter = (tokens: ReadonlyArray<string>) => ({ kind: "stall" as const, before: textStream(tokens).slice(0, 1 + tokens.length) })

/** Node announcements as a NATS client sees them, by node id. */
const watchAnnouncements = async (nats: NatsServer) => {
  const connection = await natsConnect({ servers: [nats.url] })
  const seen = new Map<string, Array<{ readonly at: number; readonly inFlight: number; readonly max: number; readonly draining: boolean }>>()
  const sub = connection.subscribe("iop.nodes.announce")
  void (async () => {
    for await (const msg of sub) {
      const a = JSON.parse(new TextDecoder().decode(msg.data))
      const list = seen.get(a.nodeId) ?? []
      list.push({ at: Date.now(), inFlight: a.inFlight, max: a.maxConcurrentRuns, draining: a.draining === true })
      seen.set(a.nodeId, list)
    }
  })()
  return {
    of: (id: string) => seen.get(id) ?? [],
    /** Waits until every node of `ids` has announced `n` more times than it had when called. */
    more: async (ids: ReadonlyArray<string>, n: number) => {
      const from = new Map(ids.map((id) => [id, seen.get(id)?.length ?? 0]))
      await eventually(() => {
        for (const id of ids) expect(seen.get(id)?.length ?? 0, id).toBeGreaterThanOrEqual(from.get(id)! + n)
      })
    },
    close: async () => {
      await sub.drain()
      await connection.close()
    }
  }
}

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
// The processes the scenarios share

let nats: NatsServer
/** The edge of the file. */
let edge: EdgeProcess
let second: Promise<EdgeProcess> | undefined
/** A second edge, started the first time a scenario needs it. */
const secondEdge = () => (second ??= startEdge({ config: edgeConfig(nats) }))

/** Node gpu-1's cap on runs: one of the three load nodes. */
const LOAD_MAX = 40
let shared: Promise<{ readonly node: NodeProcess; readonly upstream: FakeUpstream }> | undefined
/**
 * Node gpu-1, started the first time a scenario needs it: the dispatch scenario's models (echo, and `up` behind
 * a fake upstream), one of the three load nodes, and the node that outlives the NATS restart.
 */
const sharedNode = () =>
  (shared ??= (async () => {
    const upstream = await startFakeUpstream((request) => {
      const text = lastUser(request.body)
      if (text.startsWith("tool")) return { kind: "sse", events: TOOL_CALL_EVENTS }
      if (text.startsWith("slow")) return stallAfter(["t0 ", "t1 "])
      return { kind: "sse", events: textStream(["Hello", ", ", "world"], { usage: completionTokens(5, 3) }) }
    })
    const models = [echoModelConfig("echo", 0), upModel("up", upstream), echoModelConfig("load-echo", 5), echoModelConfig("survivor-echo", 30)]
    return { node: await startNode(nodeConfig(nats, "gpu-1", models, LOAD_MAX)), upstream }
  })())

beforeAll(async () => {
  nats = await startNatsServer()
  edge = await startEdge({ config: edgeConfig(nats) })
})
afterAll(async () => {
  await Promise.all([edge?.stop(), second?.then((e) => e.stop()), shared?.then((s) => s.node.stop())])
  await shared?.then((s) => s.upstream.close())
  await nats?.stop()
})

// ---------------------------------------------------------------------------

describe("dispatch over NATS through the openai SDK", () => {
  let upstream: FakeUpstream
  let client: OpenAI

  beforeAll(async () => {
    ;({ upstream } = await sharedNode())
    client = new OpenAI({ baseURL: edge.baseURL, apiKey: "x", maxRetries: 0 })
    await waitForModels(edge, ["echo", "up"])
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

  it("a client that aborts its fetch gets the node's upstream request aborted", async () => {
    // The upstream stalls after two tokens: only the client's leaving, passed on by edge and node, ends it.
    const abortedBefore = upstream.aborted.length
    const controller = new AbortController()
    const response = await chatStream(edge, "up", "slow stream", controller.signal)
    expect(response.status).toBe(200)
    const reader = sseReader(response)
    await untilContent(reader)
    controller.abort()
    await eventually(() => expect(upstream.aborted.length).toBeGreaterThan(abortedBefore))
  })
})

// ---------------------------------------------------------------------------

describe("a node killed mid-run (SIGKILL)", () => {
  let node: NodeProcess

  beforeAll(async () => {
    node = await startNode(nodeConfig(nats, "doomed", [echoModelConfig("doomed-echo", 50)]))
    await waitForModels(edge, ["doomed-echo"])
  })
  afterAll(async () => {
    await node?.stop("SIGKILL")
  })

  it("the client gets one run_error `node disconnected` then [DONE]; the model goes away", async () => {
    // 400+ tokens at 50 ms: the stream cannot end by itself while the test runs.
    const response = await chatStream(edge, "doomed-echo", words(400))
    expect(response.status).toBe(200)
    const reader = sseReader(response)
    await untilContent(reader)
    await node.stop("SIGKILL")
    // How soon the edge gives up on a silent node is bus.nodeTimeoutMs; here it is only the event that counts.
    const sse = parseSse(await reader.rest())
    expectDoneOnce(sse)
    const errors = errorsOf(sse)
    expect(errors).toHaveLength(1)
    expect(errors[0]).toMatchObject({ type: "run_error", message: "node disconnected" })
    // The error event is the last event before [DONE], and no finish chunk came.
    expect(sse.events[sse.events.length - 1].error).toBeDefined()
    expect(sse.events.some((e) => e.choices?.[0]?.finish_reason)).toBe(false)

    await eventually(async () => expect(await modelIds(edge)).not.toContain("doomed-echo"), 50)
  })
})

// ---------------------------------------------------------------------------

describe("failover between two nodes serving the same model", () => {
  let upA: FakeUpstream
  let upB: FakeUpstream
  let nodeA: NodeProcess
  let nodeB: NodeProcess | undefined

  beforeAll(async () => {
    // A's long run stalls after its first token: A stays busy until the test lets go of it.
    upA = await startFakeUpstream((request) =>
      lastUser(request.body).startsWith("long") ? stallAfter(["a0 "]) : { kind: "sse", events: textStream(["from A"]) }
    )
    upB = await startFakeUpstream({ kind: "sse", events: textStream(["from B"]) })
    nodeA = await startNode(nodeConfig(nats, "busy-a", [upModel("shared", upA)], 1))
    await waitForModels(edge, ["shared"])
  })
  afterAll(async () => {
    await nodeA?.stop()
    await nodeB?.stop()
    await upA?.close()
    await upB?.close()
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
    await waitForNode(edge, "free-b")
    // A second edge that never submitted to A (it only knows A's load from announcements, or from A's refusal).
    const edge2 = await secondEdge()
    await waitForNode(edge2, "busy-a")
    await waitForNode(edge2, "free-b")

    for (const e of [edge, edge2, edge, edge2]) {
      const sse = await readSse(await chatStream(e, "shared", "short"))
      expectDoneOnce(sse)
      expect(errorsOf(sse)).toEqual([])
      expect(contentOf(sse)).toBe("from B")
    }
    expect(upA.requests).toHaveLength(1)
    expect(upB.requests).toHaveLength(4)

    // The long run on A was unaffected: still open, A's upstream request too.
    expect(upA.aborted).toHaveLength(0)
    controller.abort()
    await eventually(() => expect(upA.aborted).toHaveLength(1))
  })
})

// ---------------------------------------------------------------------------

describe("two edges × three nodes, 200 concurrent streams", () => {
  const IDS = ["gpu-1", "load-2", "load-3"]
  const MAX = LOAD_MAX
  let nodes: Array<NodeProcess> = []
  let own: Array<NodeProcess> = []
  let edges: Array<EdgeProcess> = []

  beforeAll(async () => {
    own = await Promise.all(IDS.slice(1).map((id) => startNode(nodeConfig(nats, id, [echoModelConfig("load-echo", 5)], MAX))))
    nodes = [(await sharedNode()).node, ...own]
    edges = [edge, await secondEdge()]
    for (const e of edges) {
      await waitForModels(e, ["load-echo"])
      for (const id of IDS) await waitForNode(e, id)
    }
  })
  afterAll(async () => {
    await Promise.all(own.map((n) => n.stop()))
  })

  it("every response is well formed: echo content and [DONE] once, or a clean error", async () => {
    const N = 200
    // Watch the nodes' announcements: each carries inFlight and maxConcurrentRuns (a sampled capacity check),
    // and the gaps between them show how late heartbeats get under this load.
    const watcher = await watchAnnouncements(nats)
    // Let the just-started processes settle: every node heard on the bus twice more (with no settling, a cold
    // start under this load on a 2-core machine can make the edges declare live nodes gone).
    await watcher.more(IDS, 2)
    const startedAt = Date.now()
    const results = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const e = edges[i % 2]!
        const text = `message ${i} says hello`
        const response = await chatStream(e, "load-echo", text)
        const body = await response.text()
        return { i, text, status: response.status, body }
      })
    )
    const elapsed = Date.now() - startedAt
    // One more announcement from each node, so that the samples cover the end of the load.
    await watcher.more(IDS, 1)
    await watcher.close()
    const summary = Object.fromEntries(
      IDS.map((id) => {
        const list = watcher.of(id).filter((a) => a.at >= startedAt)
        const gaps = list.slice(1).map((a, k) => a.at - list[k]!.at)
        return [id, { announcements: list.length, maxGap: Math.max(0, ...gaps), maxInFlight: Math.max(0, ...list.map((a) => a.inFlight)), max: list[0]?.max }]
      })
    )
    console.log(`200 streams took ${elapsed} ms; announcements seen by a NATS watcher:`, summary)
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
    if (failures.length > 0) {
      const byKind = new Map<string, number>()
      for (const f of failures) {
        const kind = `${Number(f.slice(1, f.indexOf(" "))) % 2 === 0 ? "edge0" : "edge1"} ${f.slice(f.indexOf(" ") + 1)}`
        byKind.set(kind, (byKind.get(kind) ?? 0) + 1)
      }
      console.log("failures by edge and kind:", Object.fromEntries(byKind))
      const notable = (text: string) =>
        text.split("\n").filter((l) => /"logLevel":"(WARN|ERROR)|node (joined|left|missed|restarted)|NATS/.test(l)).slice(-15)
      edges.forEach((e, k) => console.log(`edge ${k} log:`, notable(e.stdout())))
      nodes.forEach((n, k) => console.log(`node ${k} log:`, notable(n.stdout())))
    }
    // The contract says refusals are retried on other nodes; with 3 × 40 slots and short runs all should pass.
    expect(notClean, "every failure is a clean 502/503 or run_error").toEqual([])
    expect(failures).toEqual([])
    // No node ever announced more runs in flight than its maxConcurrentRuns (sampled every nodeTimeoutMs / 3).
    for (const id of IDS) {
      expect(watcher.of(id).length, id).toBeGreaterThan(0)
      for (const a of watcher.of(id)) expect(a.inFlight).toBeLessThanOrEqual(MAX)
    }
    // Every node is still up.
    for (const n of nodes) expect(n.proc.exitCode).toBeNull()
  }, 60_000)
})

// ---------------------------------------------------------------------------

describe("SIGTERM on a node with an open stream", () => {
  let upstream: GatedUpstream
  let node: NodeProcess

  beforeAll(async () => {
    upstream = await startGatedUpstream()
    // A grace no slow machine runs into: the stream ends when the test lets the upstream finish it.
    node = await startNode(nodeConfig(nats, "leaving", [upModel("leaving-up", upstream)], 8, { server: { shutdownGraceMs: 120_000 } }))
    await waitForModels(edge, ["leaving-up"])
  })
  afterAll(async () => {
    await node?.stop("SIGKILL")
    await upstream?.close()
  })

  it("the stream finishes and the node exits 0", async () => {
    const watcher = await watchAnnouncements(nats)
    const response = await chatStream(edge, "leaving-up", "hello")
    expect(response.status).toBe(200)
    const reader = sseReader(response)
    await untilContent(reader)
    const code = node.stop("SIGTERM")
    // The node says on the bus that it is draining; its run is still open. Now let the upstream finish it.
    await eventually(() => expect(watcher.of("leaving").some((a) => a.draining)).toBe(true))
    await watcher.close()
    expect(node.proc.exitCode).toBeNull()
    upstream.release()
    const raw = await reader.rest()
    expect(await code).toBe(0)
    const sse = parseSse(raw)
    expectDoneOnce(sse)
    expect(errorsOf(sse)).toEqual([])
    expect(contentOf(sse)).toBe("Hello")
    expect(sse.events.filter((e) => e.choices?.[0]?.finish_reason)).toHaveLength(1)
    await eventually(async () => expect(await modelIds(edge)).not.toContain("leaving-up"), 50)
  })
})

// ---------------------------------------------------------------------------

// Last: it takes the file's nats-server down.
describe("NATS server restart mid-run", () => {
  let node: NodeProcess

  beforeAll(async () => {
    ;({ node } = await sharedNode())
    await waitForModels(edge, ["survivor-echo"])
  })

  it("the affected run fails cleanly (one error event, [DONE]); a new run works after reconnection", async () => {
    // 400+ tokens at 30 ms: the stream cannot end by itself while the test runs.
    const response = await chatStream(edge, "survivor-echo", words(400))
    expect(response.status).toBe(200)
    const reader = sseReader(response)
    await untilContent(reader)
    // NATS stays down until the edge has given up on the run (it cannot hear the node), then comes back.
    await nats.crash()
    const raw = await reader.rest()
    await nats.revive()
    const sse = parseSse(raw)
    expectDoneOnce(sse)
    const errors = errorsOf(sse)
    expect(errors).toHaveLength(1)
    expect(errors[0].type).toBe("run_error")
    expect(sse.events[sse.events.length - 1].error).toBeDefined()

    await eventually(async () => {
      const again = await readSse(await chatStream(edge, "survivor-echo", "back again"))
      expectDoneOnce(again)
      expect(errorsOf(again)).toEqual([])
      expect(contentOf(again)).toBe("back again")
    }, 250)
    expect(node.proc.exitCode).toBeNull()
  })
})
