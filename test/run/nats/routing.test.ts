import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as EdgeConfig from "../../../src/config/EdgeConfig.js"
import * as Node from "../../../src/node/Node.js"
import { NodeId } from "../../../src/protocol/RunEvent.js"
import type { SubmitRunRequest } from "../../../src/protocol/SubmitRunRequest.js"
import * as EmbeddedNode from "../../../src/run/EmbeddedNode.js"
import { NodeRegistry } from "../../../src/run/NodeRegistry.js"
import { type Handler, startFakeUpstream, textStream } from "../../support/fakeUpstream.js"
import { busConfig, type Edge, makeEdge, natsServerForFile, nodesOf, serveNode, waitFor } from "./harness.js"

const server = natsServerForFile()

const answer: Handler = () => ({ kind: "sse", events: textStream(["ok"]) })

const upstream = (handler: Handler) =>
  Effect.acquireRelease(Effect.promise(() => startFakeUpstream(handler)), (up) => Effect.promise(() => up.close()))

const provider = (baseUrls: ReadonlyArray<string>) =>
  baseUrls.length === 1
    ? { type: "openai", baseUrl: baseUrls[0], constraints: "none" }
    : { type: "openai", baseUrls: baseUrls.map((url, i) => ({ url, name: `r${i}` })), constraints: "none" }

const modelOn = (baseUrls: ReadonlyArray<string>) =>
  Schema.decodeUnknownSync(EdgeConfig.ModelConfig)({ id: "m", provider: provider(baseUrls) })

/** The edge's own replicas of "m" (the embedded node, as `iop edge` builds it), registered beside the bus's nodes. */
const embedReplicas = (edge: Edge, baseUrls: ReadonlyArray<string>) =>
  Layer.build(
    EmbeddedNode.layer.pipe(
      Layer.provide(EdgeConfig.layer(Schema.decodeUnknownSync(EdgeConfig.EdgeConfigSchema)({
        models: [{ id: "m", provider: provider(baseUrls) }]
      }))),
      Layer.provide(NodeHttpClient.dispatcherLayer)
    )
  ).pipe(Effect.provideService(NodeRegistry, edge.registry))

/** A node on the bus serving "m" from its own upstream, as `iop node` does. */
const busNode = (bus: ReturnType<typeof busConfig>, id: string, baseUrl: string) =>
  Effect.gen(function* () {
    // The node's upstream pool lives as long as the test.
    const pool = yield* Layer.build(NodeHttpClient.dispatcherLayer)
    const models = yield* Node.servedFromConfig([modelOn([baseUrl])]).pipe(Effect.provide(pool))
    return yield* serveNode(bus, Node.make({ id: NodeId.make(id), models, maxConcurrentRuns: 4 }))
  })

const turn = (history: ReadonlyArray<string>): SubmitRunRequest => ({
  model: "m",
  messages: [
    { role: "system", content: "you are a coding agent" },
    ...history.map((content, i) => ({ role: i % 2 === 0 ? ("user" as const) : ("assistant" as const), content }))
  ],
  tools: [],
  sampling: {},
  metadata: {}
})

const run = (edge: Edge, req: SubmitRunRequest) =>
  Effect.scoped(
    Effect.gen(function* () {
      const handle = yield* edge.runs.submit(req)
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(handle.events))
      return { node: handle.dispatch.nodeId, route: handle.dispatch.route, attempt: handle.dispatch.nodeAttempt, events }
    })
  )

describe("configured replicas and NATS nodes: one routing decision", () => {
  it.scopedLive("sessions spread over the edge's replicas and a node on the bus alike, and each stays where its history is", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const [a, b, c] = yield* Effect.all([upstream(answer), upstream(answer), upstream(answer)])
      const edge = yield* makeEdge(bus, "e1")
      yield* embedReplicas(edge, [a.url, b.url])
      yield* busNode(bus, "remote", c.url)
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 3)
      expect((yield* nodesOf(edge)).slice().sort()).toEqual(["m@r0", "m@r1", "remote"])
      const sessions = [["fix the parser"], ["write the docs"], ["add a test"]]
      const homes = new Map<number, string>()
      for (let t = 0; t < 3; t++) {
        for (const [i, history] of sessions.entries()) {
          const result = yield* run(edge, turn(history))
          expect(result.events.at(-1)).toMatchObject({ _tag: "Complete" })
          if (t === 0) {
            expect(result.route?.reason).toBe("no_match")
            homes.set(i, result.node)
          } else {
            expect(result.node).toBe(homes.get(i))
            expect(result.route).toMatchObject({ reason: "affinity", matchedBlocks: history.length + 1 - 2 })
          }
          history.push("answer", `file ${t}`)
        }
      }
      // New conversations took the three idle nodes in turn: one session on each, whatever carries it.
      expect(new Set(homes.values())).toEqual(new Set(["m@r0", "m@r1", "remote"]))
      expect([a.requests.length, b.requests.length, c.requests.length]).toEqual([3, 3, 3])
    }))

  it.scopedLive("the same health rules: a bus node whose upstream is down fails the run before accepting it; a replica takes it", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const a = yield* upstream(answer)
      const gone = yield* Effect.promise(async () => {
        const up = await startFakeUpstream(answer)
        await up.close()
        return up.url
      })
      const edge = yield* makeEdge(bus, "e2")
      // The bus node first: a new conversation goes to it at the first turn of the model's rotation.
      yield* busNode(bus, "remote", gone)
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      yield* embedReplicas(edge, [a.url])
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 2)
      const first = yield* run(edge, turn(["hi"]))
      expect(first).toMatchObject({ node: "embedded", attempt: 2 })
      expect(first.events.at(-1)?._tag).toBe("Complete")
      const status = yield* edge.registry.nodes
      expect(status.find((n) => n.id === "remote")?.ejected).toBe(true)
      // Ejected: the next conversations skip it without trying.
      for (const text of ["a", "b", "c"]) expect(yield* run(edge, turn([text]))).toMatchObject({ node: "embedded", attempt: 1 })
    }))
})
