import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Node from "../../../src/node/Node.js"
import { NodeId } from "../../../src/protocol/RunEvent.js"
import { fromStream } from "../../../src/providers/Provider.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import {
  busConfig,
  deltaText,
  LONG_TEXT,
  makeEdge,
  makeNode,
  nodeOf,
  nodesOf,
  NODE_TIMEOUT_MS,
  request,
  serveNode,
  startRun,
  waitFor,
  natsServerForFile,
  echoModelConfig
} from "./harness.js"

const server = natsServerForFile()

describe("NATS transport failures", () => {
  it.scopedLive("node killed (no NodeLeave): its run fails with NodeDisconnected once it misses its heartbeats", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const { node, conn } = yield* makeNode(bus, "doomed", { tokenDelayMs: 30 })
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      const { sink } = yield* startRun(edge, request(LONG_TEXT))
      yield* sink.received(2)
      // Like a crash: the socket goes away and no NodeLeave is sent.
      yield* Effect.promise(() => conn.client.close())
      const outcome = yield* sink.done
      expect(outcome !== "end" && outcome._tag).toBe("NodeDisconnected")
      expect(yield* nodesOf(edge)).toEqual([])
      expect(LONG_TEXT.startsWith(deltaText(sink.events))).toBe(true)
      // The node, cut off from its edge, stops the run too.
      yield* waitFor(node.activeRuns, (n) => n === 0)
    }))

  it.scopedLive("edge vanished (no RunCancel): the node stops its runs once the edge misses its heartbeats", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      let aborted = 0
      const endless = fromStream(() =>
        Stream.repeatEffect(Effect.as(Effect.sleep(Duration.millis(5)), RunEvent.delta("x"))).pipe(
          Stream.ensuring(Effect.sync(() => (aborted += 1)))
        )
      )
      const { node } = yield* serveNode(bus, nodeOf("n1", { endless }))
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      const { sink } = yield* startRun(edge, request("go", "endless"))
      yield* sink.received(2)
      // Like a crash of the edge: no RunCancel, its heartbeats just stop.
      yield* Effect.promise(() => edge.conn.client.close())
      yield* waitFor(node.activeRuns, (n) => n === 0)
      expect(aborted).toBe(1)
    }))

  it.scopedLive("NATS server restart mid-run: the run fails cleanly, and a new run works after reconnection", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const { node } = yield* makeNode(bus, "n1", { tokenDelayMs: 30 })
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      const { sink } = yield* startRun(edge, request(LONG_TEXT))
      yield* sink.received(2)
      // Down for longer than nodeTimeoutMs: both sides must notice.
      yield* Effect.promise(() => server.restart(NODE_TIMEOUT_MS + 300))
      const outcome = yield* sink.done
      const failedCleanly = outcome !== "end" ? outcome._tag === "NodeDisconnected" : sink.events.at(-1)?._tag === "Failed"
      expect(failedCleanly).toBe(true)
      expect(LONG_TEXT.startsWith(deltaText(sink.events))).toBe(true)
      yield* waitFor(node.activeRuns, (n) => n === 0)

      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      const again = yield* Effect.scoped(startRun(edge, request("back again")).pipe(Effect.tap((r) => r.sink.done)))
      expect(deltaText(again.sink.events)).toBe("back again")
      expect(again.sink.events.at(-1)?._tag).toBe("Complete")
    }))

  it.scopedLive("a node re-reads its models' options when it reconnects to the bus, and its edges follow", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const model = echoModelConfig(0)
      const served = yield* Node.servedFromConfig([model]).pipe(Effect.provide(NodeHttpClient.dispatcherLayer))
      const node = Node.make({ id: NodeId.make("n1"), models: served, maxConcurrentRuns: 4 })
      // What `toolFormats: "auto"` would read from an upstream whose model was swapped while the bus was down.
      let reads = 0
      const refreshModels = Effect.sync(() => {
        reads += 1
        return [{ ...model, toolFormats: ["minimax_m2" as const] }]
      })
      yield* serveNode(bus, node, { refreshModels })
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      expect(edge.registry.findModel("echo")?.toolFormats).toEqual(model.toolFormats)
      yield* Effect.promise(() => server.restart(200))
      yield* waitFor(Effect.sync(() => edge.registry.findModel("echo")?.toolFormats), (f) => f?.[0] === "minimax_m2")
      expect(reads).toBeGreaterThanOrEqual(1)
    }))
})
