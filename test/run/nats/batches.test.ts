import { toHttpError } from "../../../src/dialects/openaiError.js"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Schema from "effect/Schema"
import { ModelConfig } from "../../../src/config/EdgeConfig.js"
import * as Node from "../../../src/node/Node.js"
import { fromStream, type Provider } from "../../../src/providers/Provider.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import { NodeId, RunId } from "../../../src/protocol/RunEvent.js"
import * as EdgeTransport from "../../../src/run/nats/EdgeTransport.js"
import * as P from "../../../src/node/nats/protocol.js"
import * as NodeRegistry from "../../../src/run/NodeRegistry.js"
import * as RunService from "../../../src/run/RunService.js"
import { startFakeUpstream, textStream } from "../../support/fakeUpstream.js"
import {
  busConfig,
  deltaText,
  type Edge,
  makeEdge,
  nodeOf,
  nodesOf,
  Recorder,
  request,
  serveNode,
  spyEvents,
  startRun,
  waitFor,
  natsServerForFile
} from "./harness.js"

const server = natsServerForFile()

const MiB = 1024 * 1024

/** A provider that emits `batches` as they are, one sink write each. */
const scripted = (batches: ReadonlyArray<ReadonlyArray<RunEvent.RunEvent>>): Provider =>
  fromStream(() => Stream.fromChunks(...batches.map((b) => Chunk.fromIterable(b))))

const done = (toolCalls: ReadonlyArray<RunEvent.NativeToolCall> = []) =>
  RunEvent.complete({ finishReason: toolCalls.length > 0 ? "tool_calls" : "stop", toolCalls, metadata: {} })

/** Text of about `chars` UTF-16 units whose JSON costs vary: escapes, controls, multi-byte, pairs, lone halves. */
const hostileText = (chars: number) => {
  const unit = "The quick 😀 brown \"fox\"\n\tjumps é€ over \\ the \u0001 lazy dog \ud800 and \udc00 "
  return unit.repeat(Math.ceil(chars / unit.length)).slice(0, chars)
}

/**
 * An edge and a node of `providers` on a fresh bus, the node found.
 * Heartbeats are not what these tests are about: a slow timeout, so that a
 * busy test process (megabytes of JSON) does not count as a lost node.
 */
const setUp = (providers: Readonly<Record<string, Provider>>, options: { readonly drainTimeoutMs?: number; readonly nodeTimeoutMs?: number } = {}) =>
  Effect.gen(function* () {
    const bus = busConfig(server.url(), { nodeTimeoutMs: options.nodeTimeoutMs ?? 10_000 })
    const served = yield* serveNode(bus, nodeOf("n1", providers, 64), options)
    const edge = yield* makeEdge(bus, "e1")
    yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
    return { bus, edge, ...served }
  })

const runToEnd = (edge: Edge, model: string) =>
  Effect.scoped(startRun(edge, request("go", model)).pipe(Effect.tap((r) => r.sink.done))).pipe(Effect.map((r) => r.sink))

describe("NATS transport: batches and payload limits", () => {
  it.scopedLive("one message per tick: the batches a provider emits together go out as one, in order", () =>
    Effect.gen(function* () {
      const batches = [
        [RunEvent.delta("a"), RunEvent.delta("b")],
        [RunEvent.reasoningDelta("hm")],
        [RunEvent.delta("c"), RunEvent.reasoningDelta("d"), RunEvent.delta("e")],
        [RunEvent.delta("f"), done()]
      ]
      const { edge } = yield* setUp({ batches: scripted(batches) })
      const wire = yield* spyEvents(edge.conn, edge.edgeId)
      const sink = yield* runToEnd(edge, "batches")
      expect(sink.batches).toEqual([batches.flat()])
      yield* waitFor(Effect.sync(() => wire.length), (n) => n === 1)
      expect(wire.map((m) => m.batch)).toEqual([batches.flat()])
    }))

  it.scopedLive("a batch is not held back for the next one: batches emitted apart arrive apart", () =>
    Effect.gen(function* () {
      const apart = [[RunEvent.delta("first")], [RunEvent.delta("second"), RunEvent.delta("third")], [done()]]
      // Each batch in its own tick (a timer between them), as a paced upstream delivers its tokens.
      const paced = fromStream(() =>
        Stream.fromIterable(apart).pipe(
          Stream.tap(() => Effect.sleep(Duration.millis(20))),
          Stream.flatMap((b) => Stream.fromChunk(Chunk.fromIterable(b)), { concurrency: 1 }),
          Stream.rechunk(1)
        )
      )
      const { edge } = yield* setUp({ paced })
      const wire = yield* spyEvents(edge.conn, edge.edgeId)
      const sink = yield* runToEnd(edge, "paced")
      expect(sink.events).toEqual(apart.flat())
      yield* waitFor(Effect.sync(() => wire.length), (n) => n === sink.batches.length)
      expect(wire.map((m) => m.batch)).toEqual(sink.batches)
      expect(sink.batches[0]).toEqual([RunEvent.delta("first")])
      expect(sink.batches.length).toBeGreaterThanOrEqual(apart.length)
    }))

  it.scopedLive("a run that ended gives its upstream connection back: six runs in a row through the node use at most two", () =>
    Effect.gen(function* () {
      // `[DONE]`, then the end of the body a little later, as a real server's last write may come.
      const fake = yield* Effect.acquireRelease(
        Effect.promise(() =>
          startFakeUpstream({
            kind: "sse",
            events: [...textStream(["a", "b"]), "data: [DONE]\n\n", ": end\n\n"],
            delayMs: 20,
            done: false
          })
        ),
        (f) => Effect.promise(() => f.close())
      )
      const model = Schema.decodeUnknownSync(ModelConfig)({ id: "up", provider: { type: "openai", baseUrl: fake.url } })
      const served = yield* Node.servedFromConfig([model])
      const node = Node.make({ id: NodeId.make("n1"), models: served, maxConcurrentRuns: 4 })
      const bus = busConfig(server.url(), { nodeTimeoutMs: 10_000 })
      yield* serveNode(bus, node)
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      for (let i = 0; i < 6; i++) {
        const sink = yield* runToEnd(edge, "up")
        expect(deltaText(sink.events)).toBe("ab")
        expect(sink.events.at(-1)?._tag).toBe("Complete")
      }
      expect(fake.requests).toHaveLength(6)
      // The run is closed after its terminal event went out, not inside the provider's emit of it (which
      // aborted the body before the provider saw its own end: a new upstream connection per run).
      expect(fake.aborted).toEqual([])
      expect(fake.connections()).toBeLessThanOrEqual(2)
    }).pipe(Effect.provide(NodeHttpClient.dispatcherLayer)))

  it.scopedLive("a provider that ends without a terminal event: the edge's sink gets its deltas, then end() (no invented Failed)", () =>
    Effect.gen(function* () {
      const { edge } = yield* setUp({ cut: scripted([[RunEvent.delta("half")], [RunEvent.delta(" way")]]) })
      const wire = yield* spyEvents(edge.conn, edge.edgeId)
      const sink = yield* runToEnd(edge, "cut")
      // The run's channel turns this end into StreamClosed, as on the embedded node.
      expect(yield* sink.done).toBe("end")
      expect(sink.events).toEqual([RunEvent.delta("half"), RunEvent.delta(" way")])
      yield* waitFor(Effect.sync(() => wire.length), (n) => n >= 1)
      expect(wire.at(-1)?.end).toBe(true)
    }))

  it.scopedLive("a provider that ends without a terminal event reads the same over both transports: its deltas, then StreamClosed", () =>
    Effect.gen(function* () {
      const cut = scripted([[RunEvent.delta("half")], [RunEvent.delta(" way")]])
      const outcome = (runs: RunService.RunService.Service) =>
        Effect.scoped(Effect.flatMap(runs.submit(request("go", "cut")), (handle) =>
          Stream.runCollect(Stream.either(handle.events)).pipe(
            Effect.map((reads) => Chunk.toReadonlyArray(reads).map((r) => (Either.isRight(r) ? r.right : r.left._tag)))
          )))
      const { edge } = yield* setUp({ cut })
      const overNats = yield* outcome(edge.runs)
      const registry = yield* NodeRegistry.make
      const local = nodeOf("local", { cut })
      yield* registry.register({ id: local.id, models: local.models, maxConcurrentRuns: 4, start: local.execute })
      const embedded = yield* outcome(yield* RunService.make({ idleTimeoutMs: 60_000 }).pipe(
        Effect.provideService(NodeRegistry.NodeRegistry, registry)
      ))
      expect(overNats).toEqual([RunEvent.delta("half"), RunEvent.delta(" way"), "StreamClosed"])
      expect(embedded).toEqual(overNats)
    }))

  it.scopedLive("a 2 MiB delta (and a 1.2 MiB reasoning delta) arrive whole, in messages within max_payload", () =>
    Effect.gen(function* () {
      const text = hostileText(2 * MiB)
      const thinking = hostileText(1.2 * MiB)
      const { edge } = yield* setUp({ big: scripted([[RunEvent.reasoningDelta(thinking), RunEvent.delta(text)], [done()]]) })
      const wire = yield* spyEvents(edge.conn, edge.edgeId)
      const sink = yield* runToEnd(edge, "big")
      expect(deltaText(sink.events, "ReasoningDelta")).toBe(thinking)
      expect(deltaText(sink.events)).toBe(text)
      expect(sink.events.at(-1)).toEqual(done())
      expect(sink.events.filter((e) => e._tag !== "Delta" && e._tag !== "ReasoningDelta")).toEqual([done()])
      // Reasoning first, then content, as emitted.
      const kinds = sink.events.map((e) => e._tag).filter((t, i, all) => i === 0 || t !== all[i - 1])
      expect(kinds).toEqual(["ReasoningDelta", "Delta", "Complete"])
      const maxPayload = edge.conn.maxPayload()
      yield* waitFor(Effect.sync(() => wire.length), (n) => n === sink.batches.length)
      expect(wire.length).toBeGreaterThan(3)
      for (const m of wire) expect(m.bytes).toBeLessThanOrEqual(maxPayload)
    }))

  it.scopedLive("a 1.5 MiB tool call streamed as text arrives whole and parses", () =>
    Effect.gen(function* () {
      const args = { path: "big.txt", content: hostileText(1.5 * MiB) }
      const call = `<tool_call>${JSON.stringify({ name: "write_file", arguments: args })}</tool_call>`
      const { edge } = yield* setUp({ tool: scripted([[RunEvent.delta("Writing it.\n"), RunEvent.delta(call), done()]]) })
      const sink = yield* runToEnd(edge, "tool")
      const text = deltaText(sink.events)
      expect(text).toBe(`Writing it.\n${call}`)
      const inner = text.slice(text.indexOf("<tool_call>") + 11, text.lastIndexOf("</tool_call>"))
      expect(JSON.parse(inner)).toEqual({ name: "write_file", arguments: args })
      expect(sink.events.at(-1)).toEqual(done())
    }))

  it.scopedLive("a Complete too big for one message (native tool-call arguments) ends the run with Failed saying why", () =>
    Effect.gen(function* () {
      const huge = { id: "c1", name: "write_file", arguments: JSON.stringify({ content: "x".repeat(1.5 * MiB) }) }
      const { edge } = yield* setUp({ native: scripted([[RunEvent.delta("ok")], [done([huge])]]) })
      const sink = yield* runToEnd(edge, "native")
      expect(sink.events[0]).toEqual(RunEvent.delta("ok"))
      const last = sink.events.at(-1)
      expect(last?._tag).toBe("Failed")
      expect(last?._tag === "Failed" && last.message).toMatch(
        /^the run's result \(\d+ bytes, tool-call arguments included\) is larger than the message bus carries in one message \(NATS max_payload \d+ bytes\)$/
      )
    }))

  it.scopedLive("a RunStart over max_payload fails the start at once with RunRequestTooLarge (a 413, not a retryable 503)", () =>
    Effect.gen(function* () {
      const { edge, node } = yield* setUp({ echo: scripted([[done()]]) })
      // A reply timeout far beyond the test's: only an immediate refusal lets this test finish.
      const start = EdgeTransport.remoteStart(edge.conn, { edgeId: "e1", nodeId: NodeId.make("n1"), replyTimeoutMs: 600_000 })
      const result = yield* Effect.either(Effect.scoped(start(RunId.make("run_huge"), request("x".repeat(2 * MiB), "echo"), new Recorder())))
      expect(Either.isLeft(result) && result.left._tag).toBe("RunRequestTooLarge")
      expect(Either.isLeft(result) && result.left.message).toMatch(
        /^the request is \d+ bytes, more than the message bus to the model's nodes carries \(\d+\)$/
      )
      expect(Either.isLeft(result) && toHttpError(result.left).status).toBe(413)
      expect(yield* node.activeRuns).toBe(0)
    }))

  it.scopedLive("RunCancel and shutdown stop runs nobody reads, even a provider that will not stop", () =>
    Effect.gen(function* () {
      let aborted = 0
      const flood = fromStream(() =>
        Stream.repeatEffect(Effect.as(Effect.sleep(Duration.millis(1)), RunEvent.delta("x"))).pipe(
          Stream.ensuring(Effect.sync(() => (aborted += 1)))
        )
      )
      // Its upstream abort never returns: shutdown must go on without it.
      const stuck: Provider = { start: () => Effect.addFinalizer(() => Effect.never) }
      // Edge heartbeats far apart: the runs' silent "edge" is not what stops them.
      const { bus, edge, node, scope } = yield* setUp({ flood, stuck }, { drainTimeoutMs: 100, nodeTimeoutMs: 120_000 })
      const conn = edge.conn
      const S = P.subjects(conn.subjectPrefix)
      const v = P.PROTOCOL_VERSION
      const leaves: Array<string> = []
      yield* conn.subscribeCallback(S.leave, () => void leaves.push("leave"), () => {}).pipe(Effect.orDie)
      // RunStarts sent by hand, to events subjects nobody subscribes to.
      const startRaw = (runId: string, model: string) =>
        Effect.promise(() =>
          conn.client.request(
            S.run("n1"),
            Either.getOrThrow(P.encode.runStart({
              v,
              runId: RunId.make(runId),
              edgeId: "ghost",
              request: request("go", model),
              eventsSubject: `${bus.nats.subjectPrefix}.nobody.${runId}`,
              window: 1024 * 1024 * 1024
            })),
            { timeout: 10_000 }
          )
        ).pipe(Effect.map((msg) => P.decode.runReply(msg.data)))
      const N = 16
      const ids = Array.from({ length: N }, (_, i) => `run_flood${i}`)
      const replies = yield* Effect.forEach([...ids.map((id) => startRaw(id, "flood")), startRaw("run_stuck", "stuck")], (x) => x, { concurrency: "unbounded" })
      for (const r of replies) expect(r).toEqual({ _tag: "Ok", value: { _tag: "RunAccepted", v } })
      yield* waitFor(node.activeRuns, (n) => n === N + 1)

      for (const id of ids.slice(0, N / 2)) {
        yield* conn.publishEncoded(S.cancel("n1"), P.encode.runCancel, { v, runId: RunId.make(id), reason: "client gone" }).pipe(Effect.orDie)
      }
      yield* waitFor(Effect.sync(() => aborted), (n) => n === N / 2)

      // Returns although nobody reads the runs and one of them never stops.
      yield* Scope.close(scope, Exit.void)
      expect(aborted).toBe(N)
      yield* waitFor(Effect.sync(() => leaves.length), (n) => n === 1)
    }))
})
