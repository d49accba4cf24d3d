import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { ModelConfig } from "../../../src/node/ModelConfig.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import { NodeId, RunId } from "../../../src/protocol/RunEvent.js"
import * as EdgeTransport from "../../../src/run/nats/EdgeTransport.js"
import * as NatsBus from "../../../src/node/nats/NatsBus.js"
import { encodeRunEvents } from "../../../src/node/nats/eventsWire.js"
import * as P from "../../../src/node/nats/protocol.js"
import {
  busConfig,
  LONG_TEXT,
  makeEdge,
  makeNode,
  nodesOf,
  NODE_TIMEOUT_MS,
  Recorder,
  request,
  runLocally,
  startRun,
  waitFor,
  natsServerForFile
} from "./harness.js"

const server = natsServerForFile()

const texts = (events: ReadonlyArray<RunEvent.RunEvent>) => events.map((e) => (e._tag === "Delta" ? e.text : e._tag))

describe("NATS transport", () => {
  it.scopedLive("dispatch and streaming through NATS: the events equal the in-process ones", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const { node } = yield* makeNode(bus, "n1")
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      const req = request("the quick brown fox jumps over the lazy dog")
      const local = yield* runLocally(node, req)
      const remote = yield* Effect.scoped(
        startRun(edge, req).pipe(Effect.tap((r) => r.sink.done))
      )
      expect(remote.nodeId).toBe("n1")
      expect(yield* remote.sink.done).toBe("end")
      expect(remote.sink.events).toEqual(local.events)
      // The node sends what its provider emitted in one tick as one message: never more batches than emitted.
      expect(remote.sink.batches.length).toBeLessThanOrEqual(local.batches.length)
      expect(local.events.at(-1)?._tag).toBe("Complete")
      // The edge learned the node's model config, output options included.
      expect(edge.registry.findModel("echo")?.output.strict).toBe(false)
      expect((yield* edge.registry.nodes).map((n) => n.id)).toEqual(["n1"])
      yield* waitFor(node.activeRuns, (n) => n === 0)
    }))

  it.scopedLive("a model whose only node left is remembered as announced (an outage, not an unknown model)", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const { scope } = yield* makeNode(bus, "n1")
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      expect(edge.registry.wasServed("echo")).toBe(true)
      expect(edge.registry.wasServed("never-served")).toBe(false)
      yield* Scope.close(scope, Exit.void)
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 0)
      expect(edge.registry.findModel("echo")).toBeUndefined()
      expect(edge.registry.wasServed("echo")).toBe(true)
    }))

  it.scopedLive("a node whose models changed (same instance: it re-read its template) updates the edge's catalogue", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const edge = yield* makeEdge(bus, "e1")
      const S = P.subjects(edge.conn.subjectPrefix)
      const announce = (toolFormats: ReadonlyArray<string>) =>
        edge.conn.publishEncoded(S.announce, P.encode.announce, {
          v: P.PROTOCOL_VERSION,
          nodeId: NodeId.make("tmpl"),
          instanceId: "one-life",
          models: [Schema.decodeUnknownSync(ModelConfig)({ id: "m", toolFormats, provider: { type: "echo" } })],
          maxConcurrentRuns: 1,
          inFlight: 0,
          draining: false
        })
      yield* announce(["xml"])
      yield* waitFor(Effect.sync(() => edge.registry.findModel("m")?.toolFormats), (f) => f?.[0] === "xml")
      yield* announce(["minimax_m2", "bare_json"])
      yield* waitFor(Effect.sync(() => edge.registry.findModel("m")?.toolFormats), (f) => f?.[0] === "minimax_m2")
      expect((yield* edge.registry.nodes).map((n) => n.id)).toEqual(["tmpl"])
    }))

  it.scopedLive("least busy: two runs go to two nodes", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      yield* makeNode(bus, "a", { tokenDelayMs: 20, maxConcurrentRuns: 2 })
      yield* makeNode(bus, "b", { tokenDelayMs: 20, maxConcurrentRuns: 2 })
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 2)
      const first = yield* startRun(edge, request(LONG_TEXT))
      const second = yield* startRun(edge, request(LONG_TEXT))
      expect([first.nodeId, second.nodeId].sort()).toEqual(["a", "b"])
      yield* Effect.all([first.sink.received(1), second.sink.received(1)], { concurrency: 2 })
      expect([first, second].map((r) => r.sink.events[0]?._tag)).toEqual(["Delta", "Delta"])
    }))

  it.scopedLive("capacity holds across edges: a node at maxConcurrentRuns refuses the next run (NodeUnavailable)", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const { node } = yield* makeNode(bus, "solo", { tokenDelayMs: 20, maxConcurrentRuns: 1 })
      const edge1 = yield* makeEdge(bus, "e1")
      const edge2 = yield* makeEdge(bus, "e2")
      yield* waitFor(nodesOf(edge1), (ids) => ids.length === 1)
      yield* waitFor(nodesOf(edge2), (ids) => ids.length === 1)
      const running = yield* startRun(edge1, request(LONG_TEXT))
      yield* running.sink.received(1)
      expect(running.sink.events[0]?._tag).toBe("Delta")
      expect(yield* node.activeRuns).toBe(1)
      // Edge 2's registry thinks the node is idle; the node itself says no.
      const start = EdgeTransport.remoteStart(edge2.conn, { edgeId: "e2", nodeId: NodeId.make("solo"), replyTimeoutMs: NODE_TIMEOUT_MS })
      const refused = yield* Effect.either(Effect.scoped(start(RunId.make("run_second"), request("hi"), new Recorder())))
      expect(Either.isLeft(refused) && refused.left).toMatchObject({ _tag: "NodeUnavailable", nodeId: "solo", reason: "at capacity" })
      expect(yield* node.activeRuns).toBe(1)
      const unknown = yield* Effect.either(Effect.scoped(start(RunId.make("run_third"), request("hi", "ghost"), new Recorder())))
      expect(Either.isLeft(unknown) && unknown.left).toMatchObject({ _tag: "NodeUnavailable", reason: 'model "ghost" is not served here' })
    }))

  it.scopedLive("cancel: closing the run's scope on the edge stops the node's run", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const { node } = yield* makeNode(bus, "n1", { tokenDelayMs: 50 })
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      const scope = yield* Scope.make()
      const run = yield* startRun(edge, request(LONG_TEXT)).pipe(Scope.extend(scope))
      yield* run.sink.received(2)
      expect(yield* node.activeRuns).toBe(1)
      yield* Scope.close(scope, Exit.void)
      expect((yield* edge.registry.nodes)[0]?.inFlight).toBe(0)
      // RunCancel reached the node, which aborted the run (the echo provider's stream was interrupted).
      yield* waitFor(node.activeRuns, (n) => n === 0)
      expect(run.sink.events.filter(RunEvent.isTerminal)).toEqual([])
    }))

  it.scopedLive("drain: a node shutting down cancels what is left (the edge gets Cancelled) and leaves at once", () =>
    Effect.gen(function* () {
      // Heartbeats far apart: only the node's NodeLeave can remove it within the test.
      const bus = busConfig(server.url(), { nodeTimeoutMs: 120_000 })
      const { node, scope } = yield* makeNode(bus, "n1", { tokenDelayMs: 50, drainTimeoutMs: 150 })
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      const run = yield* startRun(edge, request(LONG_TEXT))
      yield* waitFor(node.activeRuns, (n) => n === 1)
      yield* Scope.close(scope, Exit.void)
      expect(yield* run.sink.done).toBe("end")
      const events = run.sink.events
      expect(events.at(-1)).toEqual(RunEvent.cancelled("node shutting down"))
      expect(events.filter(RunEvent.isTerminal)).toHaveLength(1)
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 0)
    }))

  it.scopedLive("a gap or a duplicate in the message sequence fails the run instead of emitting wrong text", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const conn = yield* NatsBus.make(bus)
      const S = P.subjects(conn.subjectPrefix)
      const cancels: Array<string> = []
      const v = P.PROTOCOL_VERSION
      // A scripted node: accepts, then sends one event per message with the sequence `script` says.
      const fake = (nodeId: string, script: ReadonlyArray<number | "garbage" | "other run">) =>
        conn.subscribeCallback(S.nodeInbox(nodeId), (msg) => {
          if (msg.subject === S.cancel(nodeId)) return void cancels.push(nodeId)
          const start = P.decode.runStart(msg.data)
          if (start._tag !== "Ok" || msg.reply === undefined) return
          const { eventsSubject, runId } = start.value
          conn.unsafePublish(msg.reply, Either.getOrThrow(P.encode.runReply({ _tag: "RunAccepted", v })))
          for (const [i, seq] of script.entries()) {
            const event = i === script.length - 1
              ? RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })
              : RunEvent.delta(`t${i} `)
            const data = seq === "garbage"
              ? new TextEncoder().encode(`{"v":${v},"runId":"${runId}","seq":${i},"events":[{"_tag":"Delta"}]}`)
              : encodeRunEvents({
                v,
                runId: seq === "other run" ? RunId.make("run_other") : runId,
                seq: typeof seq === "number" ? seq : i,
                events: [event]
              })
            conn.unsafePublish(eventsSubject, data)
          }
        }, () => {}).pipe(Effect.orDie)
      yield* fake("gappy", [0, 2, 3])
      yield* fake("dupe", [0, 1, 1, 2])
      yield* fake("garbled", [0, "garbage", 2])
      yield* fake("crossed", [0, "other run", 2])
      const collect = (nodeId: string) =>
        Effect.scoped(Effect.gen(function* () {
          const sink = new Recorder()
          yield* EdgeTransport.remoteStart(conn, { edgeId: "e1", nodeId: NodeId.make(nodeId), replyTimeoutMs: NODE_TIMEOUT_MS })(
            RunId.make(`run_${nodeId}`),
            request("x"),
            sink
          )
          expect(yield* sink.done).toBe("end")
          return sink.events
        }))
      expect(texts(yield* collect("gappy"))).toEqual(["t0 ", "Failed"])
      expect((yield* collect("gappy")).at(-1)).toEqual(RunEvent.failed("run stream lost events (expected event 1, got 2)"))
      expect(texts(yield* collect("dupe"))).toEqual(["t0 ", "t1 ", "Failed"])
      const garbled = yield* collect("garbled")
      expect(texts(garbled)).toEqual(["t0 ", "Failed"])
      expect(garbled.at(-1)).toEqual(RunEvent.failed("node garbled sent an unreadable event: events[0].text: expected a string"))
      expect((yield* collect("crossed")).at(-1)).toEqual(RunEvent.failed("node crossed sent an event of another run"))
      // The edge told the node to stop a run it no longer trusts.
      yield* waitFor(Effect.sync(() => cancels.length), (n) => n >= 5)
      const noReply = yield* Effect.either(Effect.scoped(
        EdgeTransport.remoteStart(conn, { edgeId: "e1", nodeId: NodeId.make("nobody"), replyTimeoutMs: NODE_TIMEOUT_MS })(
          RunId.make("run_x"),
          request("x"),
          new Recorder()
        )
      ))
      expect(Either.isLeft(noReply) && noReply.left._tag).toBe("NodeUnavailable")
    }))

  it.scopedLive("a RunStart nobody listens to fails at once; one never answered times out (a late accept is cancelled); an accepted run outlives the timeout", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const conn = yield* NatsBus.make(bus)
      const S = P.subjects(conn.subjectPrefix)
      const v = P.PROTOCOL_VERSION
      const start = (nodeId: string, replyTimeoutMs: number) =>
        Effect.either(Effect.scoped(
          EdgeTransport.remoteStart(conn, { edgeId: "e1", nodeId: NodeId.make(nodeId), replyTimeoutMs })(
            RunId.make(`run_${nodeId}`),
            request("x"),
            new Recorder()
          )
        ))
      // The server's "no responders", not the timeout (a minute: the test would not finish).
      const nobody = yield* start("nobody", 60_000)
      expect(Either.isLeft(nobody) && nobody.left).toMatchObject({ _tag: "NodeUnavailable", reason: "not listening" })

      const cancels: Array<string> = []
      let late: (() => void) | undefined
      yield* conn.subscribeCallback(S.nodeInbox("slow"), (msg) => {
        if (msg.subject === S.cancel("slow")) {
          const decoded = P.decode.runCancel(msg.data)
          return void cancels.push(decoded._tag === "Ok" ? decoded.value.runId : "?")
        }
        const reply = msg.reply
        if (reply !== undefined) {
          late = () => void conn.unsafePublish(reply, Either.getOrThrow(P.encode.runReply({ _tag: "RunAccepted", v })))
        }
      }, () => {}).pipe(Effect.orDie)
      yield* conn.flush.pipe(Effect.orDie)
      const slow = yield* start("slow", 100)
      expect(Either.isLeft(slow) && slow.left).toMatchObject({ _tag: "NodeUnavailable", reason: "no reply within 100 ms" })
      // The edge told the node to drop the run it may yet take; an accept after that changes nothing.
      yield* waitFor(Effect.sync(() => cancels), (c) => c.length === 1)
      expect(cancels).toEqual(["run_slow"])
      late?.()
      yield* conn.flush.pipe(Effect.orDie)

      // The reply timeout bounds the wait for the answer only: an accepted run may take much longer.
      yield* makeNode(bus, "n1", { tokenDelayMs: 5 })
      // An edge that heartbeats (the node stops the runs of a silent one).
      const edge = yield* makeEdge(bus, "e2")
      const sink = new Recorder()
      yield* Effect.scoped(
        EdgeTransport.remoteStart(edge.conn, { edgeId: "e2", nodeId: NodeId.make("n1"), replyTimeoutMs: 100 })(
          RunId.make("run_long"),
          request(LONG_TEXT),
          sink
        ).pipe(Effect.zipRight(sink.done))
      )
      expect(sink.events.map((e) => (e._tag === "Delta" ? e.text : "")).join("")).toBe(LONG_TEXT)
      expect(sink.events.at(-1)?._tag).toBe("Complete")
    }))
})
