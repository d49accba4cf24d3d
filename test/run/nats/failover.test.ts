import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { NodeId, RunId } from "../../../src/protocol/RunEvent.js"
import * as EdgeTransport from "../../../src/run/nats/EdgeTransport.js"
import { busConfig, LONG_TEXT, makeEdge, makeNode, nodesOf, NODE_TIMEOUT_MS, Recorder, request, waitFor, natsServerForFile } from "./harness.js"

const server = natsServerForFile()

describe("failover", () => {
  // Failover is the RunService's (a refusal before the first event tries another node); off until it runs on RunSink.
  it.scopedLive("a run refused by a node busy with another edge's run goes to another node", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const a = yield* makeNode(bus, "a", { tokenDelayMs: 20, maxConcurrentRuns: 1 })
      yield* makeNode(bus, "b", { tokenDelayMs: 5, maxConcurrentRuns: 2 })
      const edge1 = yield* makeEdge(bus, "e1")
      const edge2 = yield* makeEdge(bus, "e2")
      yield* waitFor(nodesOf(edge1), (ids) => ids.length === 2)
      const busy = EdgeTransport.remoteStart(edge2.conn, { edgeId: "e2", nodeId: NodeId.make("a"), replyTimeoutMs: NODE_TIMEOUT_MS })
      const sink = new Recorder()
      yield* busy(RunId.make("run_busy"), request(LONG_TEXT), sink)
      yield* sink.received(1)
      expect(yield* a.node.activeRuns).toBe(1)
      const runs = yield* Effect.all(
        [1, 2].map(() => Effect.scoped(edge1.runs.submit(request("hello there")).pipe(Effect.flatMap((h) => Stream.runCollect(h.events))))),
        { concurrency: 2 }
      )
      for (const r of runs) expect(Chunk.toReadonlyArray(r).at(-1)?._tag).toBe("Complete")
      expect(yield* a.node.activeRuns).toBe(1)
      expect((yield* edge1.registry.nodes).map((n) => n.inFlight)).toEqual([0, 0])
    }))
})
