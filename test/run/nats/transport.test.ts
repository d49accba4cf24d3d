import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as RunEvent from "../../../src/run/RunEvent.js"
import { NodeId, RunId } from "../../../src/run/RunEvent.js"
import * as EdgeTransport from "../../../src/run/transport/nats/EdgeTransport.js"
import * as NatsBus from "../../../src/run/transport/nats/NatsBus.js"
import * as P from "../../../src/run/transport/nats/protocol.js"
import { type NatsServer, startNatsServer } from "../../support/natsServer.js"
import { busConfig, LONG_TEXT, makeEdge, makeNode, nodesOf, NODE_TIMEOUT_MS, request, waitFor } from "./harness.js"

let server: NatsServer
beforeAll(async () => {
  server = await startNatsServer()
})
afterAll(async () => {
  await server?.stop()
})

const texts = (events: ReadonlyArray<RunEvent.RunEvent>) => events.map((e) => (e._tag === "Delta" ? e.text : e._tag))

describe("NATS transport", () => {
  it.scopedLive("dispatch and streaming through NATS: the events equal the in-process ones", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url)
      const { node } = yield* makeNode(bus, "n1")
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      const req = request("the quick brown fox jumps over the lazy dog")
      const local = Chunk.toReadonlyArray(yield* Stream.runCollect(node.execute(RunId.make("local"), req)))
      const remote = yield* Effect.scoped(
        edge.runs.submit(req).pipe(
          Effect.flatMap((h) => Stream.runCollect(h.events).pipe(Effect.map((c) => ({ h, events: Chunk.toReadonlyArray(c) }))))
        )
      )
      expect(remote.h.dispatch.nodeId).toBe("n1")
      expect(remote.events).toEqual(local)
      expect(local.at(-1)?._tag).toBe("Complete")
      // The edge learned the node's model config, output options included.
      const announced = yield* edge.discovery.findModel("echo")
      expect(Option.map(announced, (m) => m.output.strict)).toEqual(Option.some(false))
      expect(Array.from((yield* edge.discovery.announcedModels).keys())).toEqual(["n1"])
      expect(yield* node.activeRuns).toBe(0)
    }))

  it.scopedLive("least busy: two runs go to two nodes", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url)
      yield* makeNode(bus, "a", { tokenDelayMs: 20, maxConcurrentRuns: 2 })
      yield* makeNode(bus, "b", { tokenDelayMs: 20, maxConcurrentRuns: 2 })
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 2)
      const first = yield* edge.runs.submit(request(LONG_TEXT))
      const second = yield* edge.runs.submit(request(LONG_TEXT))
      expect([first.dispatch.nodeId, second.dispatch.nodeId].sort()).toEqual(["a", "b"])
      const heads = yield* Effect.all([first, second].map((h) => Stream.runHead(h.events)), { concurrency: 2 })
      expect(heads.map((h) => Option.map(h, (e) => e._tag))).toEqual([Option.some("Delta"), Option.some("Delta")])
    }))

  it.scopedLive("capacity holds across edges: a node at maxConcurrentRuns refuses the next run (NodeUnavailable)", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url)
      const { node } = yield* makeNode(bus, "solo", { tokenDelayMs: 20, maxConcurrentRuns: 1 })
      const edge1 = yield* makeEdge(bus, "e1")
      const edge2 = yield* makeEdge(bus, "e2")
      yield* waitFor(nodesOf(edge1), (ids) => ids.length === 1)
      yield* waitFor(nodesOf(edge2), (ids) => ids.length === 1)
      const running = yield* edge1.runs.submit(request(LONG_TEXT))
      const pulled = yield* Stream.toPull(running.events)
      expect(Chunk.toReadonlyArray(yield* pulled)[0]?._tag).toBe("Delta")
      expect(yield* node.activeRuns).toBe(1)
      // Edge 2's registry thinks the node is idle; the node itself says no.
      const start = EdgeTransport.remoteStart(edge2.conn, { edgeId: "e2", nodeId: NodeId.make("solo"), replyTimeoutMs: NODE_TIMEOUT_MS })
      const refused = yield* Effect.either(Stream.runCollect(start(RunId.make("run_second"), request("hi"))))
      expect(Either.isLeft(refused) && refused.left).toMatchObject({ _tag: "NodeUnavailable", nodeId: "solo", reason: "at capacity" })
      expect(yield* node.activeRuns).toBe(1)
      const unknown = yield* Effect.either(Stream.runCollect(start(RunId.make("run_third"), request("hi", "ghost"))))
      expect(Either.isLeft(unknown) && unknown.left.reason).toBe('model "ghost" is not served here')
    }))

  it.scopedLive("cancel: interrupting the edge-side stream stops the node's run within 1 s", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url)
      const { node } = yield* makeNode(bus, "n1", { tokenDelayMs: 50 })
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      const scope = yield* Scope.make()
      const handle = yield* edge.runs.submit(request(LONG_TEXT)).pipe(Scope.extend(scope))
      const seen: Array<RunEvent.RunEvent> = []
      const fiber = yield* handle.events.pipe(Stream.runForEach((e) => Effect.sync(() => seen.push(e))), Effect.fork)
      yield* waitFor(Effect.sync(() => seen.length), (n) => n >= 2)
      expect(yield* node.activeRuns).toBe(1)
      const t0 = Date.now()
      yield* Fiber.interrupt(fiber)
      yield* Scope.close(scope, Exit.void)
      yield* waitFor(node.activeRuns, (n) => n === 0, 1000)
      expect(Date.now() - t0).toBeLessThan(1000)
      expect((yield* edge.registry.nodes)[0]?.inFlight).toBe(0)
    }))

  it.scopedLive("drain: a node shutting down cancels what is left (the edge gets Cancelled) and leaves at once", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url)
      const { node, scope } = yield* makeNode(bus, "n1", { tokenDelayMs: 50, drainTimeoutMs: 150 })
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      const handle = yield* edge.runs.submit(request(LONG_TEXT))
      const fiber = yield* Stream.runCollect(handle.events).pipe(Effect.fork)
      yield* waitFor(node.activeRuns, (n) => n === 1)
      const t0 = Date.now()
      yield* Scope.close(scope, Exit.void)
      const events = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
      expect(events.at(-1)).toEqual(RunEvent.cancelled("node shutting down"))
      expect(events.filter(RunEvent.isTerminal)).toHaveLength(1)
      // NodeLeave, not the heartbeat timeout, removed it.
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 0, NODE_TIMEOUT_MS)
      expect(Date.now() - t0).toBeLessThan(150 + NODE_TIMEOUT_MS)
    }))

  it.scopedLive("a gap or a duplicate in the event sequence fails the run instead of emitting wrong text", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url)
      const conn = yield* NatsBus.make(bus)
      const S = P.subjects(conn.subjectPrefix)
      const cancels: Array<string> = []
      // A scripted node: accepts, then sends events with the sequence `script` says.
      const fake = (nodeId: string, script: ReadonlyArray<number>) =>
        conn.subscribe(S.nodeInbox(nodeId)).pipe(
          Effect.flatMap((inbox) =>
            inbox.pipe(
              Stream.runForEach((msg) =>
                Effect.gen(function* () {
                  if (msg.subject === S.cancel(nodeId)) return void cancels.push(nodeId)
                  const start = P.decode.runStart(msg.data)
                  if (start._tag !== "Ok" || msg.reply === undefined) return
                  yield* conn.publishEncoded(msg.reply, P.encode.runReply, { _tag: "RunAccepted", v: 1 })
                  for (const [i, seq] of script.entries()) {
                    const event = i === script.length - 1 ? RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} }) : RunEvent.delta(`t${i} `)
                    yield* conn.publishEncoded(start.value.eventsSubject, P.encode.runEvent, { v: 1, runId: start.value.runId, seq, event })
                  }
                })
              ),
              Effect.forkScoped
            )
          )
        )
      yield* fake("gappy", [0, 2, 3])
      yield* fake("dupe", [0, 1, 1, 2])
      const collect = (nodeId: string) =>
        EdgeTransport.remoteStart(conn, { edgeId: "e1", nodeId: NodeId.make(nodeId), replyTimeoutMs: NODE_TIMEOUT_MS })(
          RunId.make(`run_${nodeId}`),
          request("x")
        ).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))
      expect(texts(yield* collect("gappy"))).toEqual(["t0 ", "Failed"])
      expect((yield* collect("gappy")).at(-1)).toEqual(RunEvent.failed("run stream lost events (expected event 1, got 2)"))
      expect(texts(yield* collect("dupe"))).toEqual(["t0 ", "t1 ", "Failed"])
      // The edge told the node to stop a run it no longer trusts.
      yield* waitFor(Effect.sync(() => cancels.length), (n) => n >= 3)
      const noReply = yield* Effect.either(Stream.runCollect(
        EdgeTransport.remoteStart(conn, { edgeId: "e1", nodeId: NodeId.make("nobody"), replyTimeoutMs: NODE_TIMEOUT_MS })(
          RunId.make("run_x"),
          request("x")
        )
      ))
      expect(Either.isLeft(noReply) && noReply.left._tag).toBe("NodeUnavailable")
    }))
})
