import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { ChatCompletions } from "../../src/dialects/chat-completions/ChatCompletions.js"
import { Metrics } from "../../src/observability/Metrics.js"
import type { SubmitRunRequest } from "../../src/protocol/SubmitRunRequest.js"
import { healthChecks } from "../../src/run/EmbeddedNode.js"
import { layer as NodeRegistryLayer, NodeRegistry } from "../../src/run/NodeRegistry.js"
import { NodeId } from "../../src/protocol/RunEvent.js"
import { RunService } from "../../src/run/RunService.js"
import * as TestEdge from "../../src/testing/TestEdge.js"
import { scriptedNode } from "../support/ScriptedNode.js"
import { type FakeUpstream, startFakeUpstream, textStream, type Handler } from "../support/fakeUpstream.js"

/** A real HTTP upstream on an ephemeral port, closed with the test's scope (closing twice is harmless). */
const upstream = (handler: Handler, options?: Parameters<typeof startFakeUpstream>[1]) =>
  Effect.acquireRelease(Effect.promise(() => startFakeUpstream(handler, options)), (up) => Effect.promise(() => up.close()))

const answer: Handler = () => ({
  kind: "sse",
  events: textStream(["hello", " there"], { usage: { prompt_tokens: 40, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 30 } } })
})

const request = (turns: ReadonlyArray<string>): SubmitRunRequest => ({
  model: "m",
  messages: [
    { role: "system", content: "you are a coding agent" },
    ...turns.map((content, i) => ({ role: i % 2 === 0 ? ("user" as const) : ("assistant" as const), content }))
  ],
  tools: [],
  sampling: {},
  metadata: {}
})

/** The edge with model "m" on `replicas` (their base URLs), its runs read through the run service. */
const edgeOn = (replicas: ReadonlyArray<FakeUpstream | string>) =>
  TestEdge.layer({
    config: {
      models: [{
        id: "m",
        provider: {
          type: "openai",
          baseUrls: replicas.map((r, i) => ({ url: typeof r === "string" ? r : r.url, name: ["a", "b", "c"][i]! })) as [
            { url: string; name: string }
          ],
          constraints: "none"
        }
      }]
    }
  }).pipe(Layer.provide(NodeHttpClient.dispatcherLayer))

const runToEnd = (req: SubmitRunRequest) =>
  Effect.scoped(
    Effect.gen(function* () {
      const handle = yield* (yield* RunService).submit(req)
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(handle.events).pipe(Effect.orElseSucceed(() => Chunk.empty())))
      return { node: handle.dispatch.nodeId, attempt: handle.dispatch.nodeAttempt, route: handle.dispatch.route, events }
    })
  )

/** An address nothing listens on (a replica that is down from the start). */
const deadAddress = Effect.promise(async () => {
  const up = await startFakeUpstream(answer)
  await up.close()
  return up.url
})

describe("replicas of a model (provider.baseUrls): one node each, routed and ejected by the run plane", () => {
  it.scopedLive("a replica killed mid-run: that run fails, the replica is ejected, the next run is served by another", () =>
    Effect.gen(function* () {
      // Replica a streams slowly enough to be killed in the middle; b answers at once.
      const a = yield* upstream(() => ({ kind: "sse", events: textStream(Array.from({ length: 50 }, () => "x")), delayMs: 20 }))
      const b = yield* upstream(answer)
      yield* Effect.gen(function* () {
        const runs = yield* RunService
        const registry = yield* NodeRegistry
        // The run ends with its scope, as a response does: its node's health is reported then.
        const last = yield* Effect.scoped(Effect.gen(function* () {
          const handle = yield* runs.submit(request(["read the file"]))
          expect(handle.dispatch.nodeId).toBe("m@a")
          const reading = yield* Effect.fork(Stream.runCollect(handle.events).pipe(Effect.either))
          yield* Effect.sleep(120)
          yield* Effect.promise(() => a.close())
          const broken = yield* Fiber.join(reading)
          return Either.isRight(broken) ? Chunk.toReadonlyArray(broken.right).at(-1) : undefined
        }))
        expect(last).toMatchObject({ _tag: "Failed", transport: "broken" })
        expect((yield* registry.nodes).find((n) => n.id === "m@a")?.ejected).toBe(true)
        // Same session: affinity would send it to a, which is ejected.
        const next = yield* runToEnd(request(["read the file", "ok", "and the next one"]))
        expect(next.node).toBe("m@b")
        expect(next.events.at(-1)?._tag).toBe("Complete")
        expect(a.requests.length).toBe(1)
      }).pipe(Effect.provide(edgeOn([a, b])))
    }))

  it.scopedLive("a replica down before the run: the run is tried on the next one, told which attempt it is, and answered", () =>
    Effect.gen(function* () {
      const down = yield* deadAddress
      const b = yield* upstream(answer)
      yield* Effect.gen(function* () {
        const first = yield* runToEnd(request(["hi"]))
        expect(first).toMatchObject({ node: "m@b", attempt: 2 })
        expect(first.events.map((e) => e._tag)).toEqual(["Delta", "Delta", "Complete"])
        const registry = yield* NodeRegistry
        expect((yield* registry.nodes).map((n) => [n.id, n.ejected])).toEqual([["m@a", true], ["m@b", false]])
        // While a is ejected every run goes to b at its first attempt.
        const second = yield* runToEnd(request(["hello"]))
        expect(second).toMatchObject({ node: "m@b", attempt: 1 })
        expect(b.requests.length).toBe(2)
        // Through the chat plane, the ground truth per node: prompt and cached tokens, runs by routing reason.
        const chat = yield* ChatCompletions
        yield* chat.create(yield* chat.request({ model: "m", messages: [{ role: "user", content: "hi" }] }))
        const { body } = yield* (yield* Metrics).exposition
        expect(body).toContain('iop_node_prompt_tokens_total{model="m",node="m@b"} 40')
        expect(body).toContain('iop_node_cached_prompt_tokens_total{model="m",node="m@b"} 30')
        expect(body).toContain('iop_node_runs_total{model="m",node="m@b",route="only"} 1')
      }).pipe(Effect.provide(edgeOn([down, b])))
    }))

  it.scopedLive("a 5xx before the answer is tried elsewhere; a 4xx is the request's own and is not", () =>
    Effect.gen(function* () {
      const failing = yield* upstream(() => ({ kind: "json", status: 503, body: { error: { message: "loading model" } } }))
      const b = yield* upstream(answer)
      yield* Effect.gen(function* () {
        const first = yield* runToEnd(request(["hi"]))
        expect(first).toMatchObject({ node: "m@b", attempt: 2 })
        expect(first.events.at(-1)?._tag).toBe("Complete")
      }).pipe(Effect.provide(edgeOn([failing, b])))
      const refusing = yield* upstream(() => ({ kind: "json", status: 400, body: { error: { message: "context too long" } } }))
      const c = yield* upstream(answer)
      yield* Effect.gen(function* () {
        const first = yield* runToEnd(request(["hi"]))
        expect(first).toMatchObject({ node: "m@a", attempt: 1 })
        expect(first.events.at(-1)).toMatchObject({ _tag: "Failed", upstream: { status: 400 } })
        expect(c.requests.length).toBe(0)
      }).pipe(Effect.provide(edgeOn([refusing, c])))
    }))

  it.scopedLive("every replica down: the caller gets the upstream's failure after the attempts, nothing hangs", () =>
    Effect.gen(function* () {
      const x = yield* deadAddress
      const y = yield* deadAddress
      yield* Effect.gen(function* () {
        const run = yield* runToEnd(request(["hi"]))
        expect(run.attempt).toBe(2)
        expect(run.events).toEqual([{ _tag: "Failed", message: "upstream unreachable", transport: "unreachable" }])
      }).pipe(Effect.provide(edgeOn([x, y])))
    }))

  it.scopedLive("affinity over real replicas: each session's turns stay on the replica that has its history", () =>
    Effect.gen(function* () {
      const a = yield* upstream(answer)
      const b = yield* upstream(answer)
      yield* Effect.gen(function* () {
        const sessions = [["fix the parser"], ["write the docs"], ["add a test"], ["profile the server"]]
        const where = new Map<number, Set<string>>()
        for (let turn = 0; turn < 4; turn++) {
          for (const [i, s] of sessions.entries()) {
            const run = yield* runToEnd(request(s))
            where.set(i, (where.get(i) ?? new Set()).add(run.node))
            // Its system message and every message of its last turn.
            if (turn > 0) expect(run.route).toMatchObject({ reason: "affinity", matchedBlocks: s.length - 1 })
            s.push("answer", `file contents ${turn}`)
          }
        }
        for (const nodes of where.values()) expect(nodes.size).toBe(1)
        expect(a.requests.length).toBeGreaterThan(0)
        expect(b.requests.length).toBeGreaterThan(0)
      }).pipe(Effect.provide(edgeOn([a, b])))
    }))
})

describe("node health by the Clock", () => {
  const twoNodes = Effect.gen(function* () {
    const registry = yield* NodeRegistry
    yield* registry.register(scriptedNode("a", ["m"]).connection)
    yield* registry.register(scriptedNode("b", ["m"]).connection)
    return registry
  })
  const pick = (registry: NodeRegistry.Service) =>
    Effect.scoped(Effect.map(registry.acquire("m"), (lease) => lease.node.id))

  it.scoped("an ejected node gets no run until its backoff passed; on probation a failure ejects it for twice as long", () =>
    Effect.gen(function* () {
      const registry = yield* twoNodes
      const lease = yield* Effect.scoped(Effect.map(registry.acquire("m"), (l) => (l.report("unreachable"), l.node.id)))
      expect(lease).toBe("a")
      const picks = (n: number) => Effect.map(Effect.all(Array.from({ length: n }, () => pick(registry))), (ids) => new Set(ids))
      expect(yield* picks(6)).toEqual(new Set(["b"]))
      yield* TestClock.adjust(999)
      expect(yield* picks(6)).toEqual(new Set(["b"]))
      yield* TestClock.adjust(1)
      // Back among the idle nodes new conversations take in turn.
      expect(yield* picks(6)).toEqual(new Set(["a", "b"]))
      yield* Effect.scoped(Effect.flatMap(registry.acquire("m", { exclude: new Set([NodeId.make("b")]) }), (l) => Effect.sync(() => l.report("failed"))))
      yield* TestClock.adjust(1999)
      expect(yield* picks(6)).toEqual(new Set(["b"]))
      yield* TestClock.adjust(1)
      expect(yield* picks(6)).toEqual(new Set(["a", "b"]))
    }).pipe(Effect.provide(NodeRegistryLayer)))

  it.scoped("active checks: a failing /health ejects a replica, a passing one puts it back at the next check", () =>
    Effect.gen(function* () {
      let healthy = false
      const up = yield* upstream(answer, { routes: { "/health": () => (healthy ? { body: { status: "ok" } } : { status: 503 }) } })
      const registry = yield* twoNodes
      yield* healthChecks(NodeId.make("a"), up.url, { path: "/health", intervalMs: 5_000, timeoutMs: 2_000 }, { apiKey: undefined })
      // The first check runs at once (a real request: wait for its answer, not for the clock).
      yield* Effect.promise(() => waitUntil(() => up.others.length === 1))
      yield* waitFor(registry, true)
      healthy = true
      yield* TestClock.adjust(4_999)
      expect(up.others.length).toBe(1)
      yield* TestClock.adjust(1)
      yield* Effect.promise(() => waitUntil(() => up.others.length === 2))
      yield* waitFor(registry, false)
      expect(yield* pick(registry)).toBe("a")
    }).pipe(Effect.provide(Layer.merge(NodeRegistryLayer, NodeHttpClient.dispatcherLayer))))
})

const waitUntil = async (holds: () => boolean): Promise<void> => {
  for (let i = 0; i < 500 && !holds(); i++) await new Promise((resolve) => setTimeout(resolve, 5))
}

/** Lets the check's answer be judged (a few fiber turns after the request's promise resolved). */
const waitFor = (registry: NodeRegistry.Service, ejected: boolean) =>
  Effect.gen(function* () {
    for (let i = 0; i < 200; i++) {
      if ((yield* registry.nodes).find((n) => n.id === "a")?.ejected === ejected) return
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 2)))
    }
    expect.unreachable(`node a never became ${ejected ? "ejected" : "healthy"}`)
  })
