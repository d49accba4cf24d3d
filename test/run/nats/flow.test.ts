import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as HashMap from "effect/HashMap"
import * as Logger from "effect/Logger"
import * as Scope from "effect/Scope"
import type { Provider } from "../../../src/providers/Provider.js"
import type { RunError } from "../../../src/protocol/errors.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import { NodeId, RunId } from "../../../src/protocol/RunEvent.js"
import type { RunSink } from "../../../src/protocol/RunSink.js"
import { CREDIT_WINDOW } from "../../../src/node/nats/credit.js"
import * as EdgeTransport from "../../../src/run/nats/EdgeTransport.js"
import * as NatsBus from "../../../src/node/nats/NatsBus.js"
import {
  busConfig,
  deltaText,
  LONG_TEXT,
  makeEdge,
  makeNode,
  newRunId,
  nodeOf,
  nodesOf,
  NODE_TIMEOUT_MS,
  Recorder,
  request,
  serveNode,
  spyEvents,
  startRun,
  waitFor,
  natsServerForFile
} from "./harness.js"

const server = natsServerForFile()

const KiB = 1024
const done = RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })

/** A one-shot signal a test waits on (no sleeping). */
const signal = () => {
  const d = Deferred.unsafeMake<void>(FiberId.none)
  return { fire: () => Deferred.unsafeDone(d, Exit.void), wait: Deferred.await(d) }
}

/**
 * A provider that reads an upstream's answer as the OpenAI provider does: one `emit` per read, each read in a
 * turn of the event loop of its own, pausing when `emit` answers false until `onReady` calls back.
 */
const reads = (chunks: ReadonlyArray<string>) => {
  let pausedNow = false
  let pauses = 0
  let waiter: Deferred.Deferred<void> | undefined
  const provider: Provider = {
    start: (_request, sink) =>
      Effect.gen(function* () {
        let i = 0
        let stopped = false
        const next = (): void => {
          if (stopped) return
          const chunk = chunks[i]
          if (chunk === undefined) {
            sink.emit([done])
            return sink.end()
          }
          i += 1
          if (sink.emit([RunEvent.delta(chunk)])) return void setImmediate(next)
          pausedNow = true
          pauses += 1
          if (waiter !== undefined) Deferred.unsafeDone(waiter, Exit.void)
          sink.onReady(() => {
            pausedNow = false
            setImmediate(next)
          })
        }
        yield* Effect.addFinalizer(() => Effect.sync(() => void (stopped = true)))
        setImmediate(next)
      })
  }
  return {
    provider,
    get pausedNow() {
      return pausedNow
    },
    get pauses() {
      return pauses
    },
    /** Waits until the provider is paused. */
    paused: Effect.suspend(() => {
      if (pausedNow) return Effect.void
      const d = Deferred.unsafeMake<void>(FiberId.none)
      waiter = d
      return Deferred.await(d)
    })
  }
}

/** A sink whose reader stops reading once `afterChars` of text arrived, until `release` (then reads on). */
class StallingSink implements RunSink {
  readonly recorder = new Recorder()
  /** How many batches the sink had taken (the one it answered false to included) when it stalled. */
  stalledAt = -1
  private chars = 0
  private stalled = false
  private resume: (() => void) | undefined
  private readonly stalledNow = signal()

  constructor(private readonly afterChars: number) {}

  readonly emit = (events: ReadonlyArray<RunEvent.RunEvent>): boolean => {
    this.recorder.emit(events)
    if (this.stalled) return false
    this.chars += deltaText(events).length
    if (this.chars < this.afterChars || this.stalledAt !== -1) return true
    this.stalled = true
    this.stalledAt = this.recorder.batches.length
    this.stalledNow.fire()
    return false
  }
  readonly accept = (): void => this.recorder.accept()
  readonly end = (): void => this.recorder.end()
  readonly fail = (error: RunError): void => this.recorder.fail(error)
  readonly onReady = (resume: () => void): void => {
    this.resume = resume
  }
  readonly stalledYet = this.stalledNow.wait
  /** The reader caught up: reads on from now. */
  readonly release = (): void => {
    this.stalled = false
    const resume = this.resume
    this.resume = undefined
    resume?.()
  }
}

/** An edge and a node of `providers` on a fresh bus, the node found (heartbeats slow: a busy test is no lost node). */
const setUp = (providers: Readonly<Record<string, Provider>>) =>
  Effect.gen(function* () {
    const bus = busConfig(server.url(), { nodeTimeoutMs: 10_000 })
    const served = yield* serveNode(bus, nodeOf("n1", providers, 8))
    const edge = yield* makeEdge(bus, "e1")
    yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
    return { bus, edge, ...served }
  })

describe("NATS transport: flow control and the run's life", () => {
  it.scopedLive("a stalled reader keeps the edge bounded (a window and one message), pauses the node's provider, and resuming lets the whole answer through in order", () =>
    Effect.gen(function* () {
      // 4 MiB in 32 KiB reads, far more than the window.
      const chunk = (i: number) => `${String(i).padStart(6, "0")} ${"lorem ipsum ".repeat(2730)}`
      const chunks = Array.from({ length: 128 }, (_, i) => chunk(i))
      const text = chunks.join("")
      const upstream = reads(chunks)
      const { edge, conn: nodeConn } = yield* setUp({ big: upstream.provider })
      const wire = yield* spyEvents(edge.conn, edge.edgeId)
      // The reader stops after 600 KiB: credits were granted before, none after.
      const sink = new StallingSink(600 * KiB)
      const lease = yield* edge.registry.acquire("big")
      yield* lease.node.start(newRunId(), request("go", "big"), sink)
      yield* sink.stalledYet
      // Until the node is paused with every credit the edge sent taken in (one sent before the stall may land
      // after a pause), and everything it published has reached the edge.
      for (;;) {
        // An edge that does not hold the node back gets the whole answer while its reader is stalled.
        const first = yield* Effect.raceFirst(Effect.as(upstream.paused, "paused"), Effect.as(sink.recorder.done, "finished"))
        expect(first).toBe("paused")
        yield* edge.conn.flush.pipe(Effect.orDie)
        yield* nodeConn.flush.pipe(Effect.orDie)
        if (upstream.pausedNow) break
      }
      yield* nodeConn.flush.pipe(Effect.orDie)
      yield* edge.conn.flush.pipe(Effect.orDie)
      const received = wire.reduce((n, m) => n + m.bytes, 0)
      const largest = Math.max(...wire.map((m) => m.bytes))
      // The messages from the one the reader did not take: what the edge holds for it.
      const held = wire.slice(sink.stalledAt - 1).reduce((n, m) => n + m.bytes, 0)
      expect(sink.stalledAt).toBeGreaterThan(1)
      expect(held).toBeLessThanOrEqual(CREDIT_WINDOW + largest)
      expect(received).toBeLessThan(text.length / 2)
      expect(upstream.pauses).toBeGreaterThanOrEqual(1)
      expect(sink.recorder.calls).not.toContain("end")

      sink.release()
      expect(yield* sink.recorder.done).toBe("end")
      expect(deltaText(sink.recorder.events)).toBe(text)
      expect(sink.recorder.events.filter((e) => e._tag !== "Delta")).toEqual([done])
      yield* waitFor(Effect.sync(() => wire.length), (n) => n === sink.recorder.batches.length)
      expect(wire.map((m) => m.seq)).toEqual(wire.map((_, i) => i))
      expect(wire.at(-1)?.end).toBe(true)
    }))

  it.scopedLive("accept() on the node reaches the edge's sink before the first event: apart (a message of its own) or with it", () =>
    Effect.gen(function* () {
      const go = signal()
      const early: Provider = {
        start: (_request, sink) =>
          Effect.gen(function* () {
            sink.accept()
            yield* go.wait
            sink.emit([RunEvent.delta("hi")])
            sink.emit([done])
            sink.end()
          }).pipe(Effect.forkScoped)
      }
      const together: Provider = {
        start: (_request, sink) =>
          Effect.sync(() => {
            sink.accept()
            sink.emit([RunEvent.delta("hi")])
            setImmediate(() => sink.emit([done]))
          })
      }
      const { edge } = yield* setUp({ early, together })
      const wire = yield* spyEvents(edge.conn, edge.edgeId)

      const first = yield* startRun(edge, request("go", "early"))
      // The provider emits nothing until the edge's sink was told: the response may start before any event.
      yield* first.sink.acceptedYet
      expect(first.sink.events).toEqual([])
      go.fire()
      expect(yield* first.sink.done).toBe("end")
      expect(first.sink.calls).toEqual(["accept", "emit", "end"])
      expect(first.sink.events).toEqual([RunEvent.delta("hi"), done])
      yield* waitFor(Effect.sync(() => wire.length), (n) => n >= 2)
      expect(wire[0]).toMatchObject({ seq: 0, accepted: true, batch: [] })
      expect(wire[1]).toMatchObject({ seq: 1, accepted: false, end: true })

      const second = yield* startRun(edge, request("go", "together"))
      expect(yield* second.sink.done).toBe("end")
      expect(second.sink.calls).toEqual(["accept", "emit", "emit", "end"])
      yield* waitFor(Effect.sync(() => wire.length), (n) => n >= 4)
      expect(wire[2]).toMatchObject({ seq: 0, accepted: true, batch: [RunEvent.delta("hi")] })
    }))

  it.scopedLive("progress() on the node (a native tool call streaming, no event yet) reaches the edge's sink before what follows", () =>
    Effect.gen(function* () {
      const go = signal()
      const calling: Provider = {
        start: (_request, sink) =>
          Effect.gen(function* () {
            sink.accept()
            sink.progress?.()
            yield* go.wait
            sink.emit([done])
            sink.end()
          }).pipe(Effect.forkScoped)
      }
      const { edge } = yield* setUp({ calling })
      const run = yield* startRun(edge, request("go", "calling"))
      yield* waitFor(Effect.sync(() => run.sink.calls.length), (n) => n >= 2)
      expect(run.sink.calls).toEqual(["accept", "progress"])
      go.fire()
      expect(yield* run.sink.done).toBe("end")
      expect(run.sink.calls).toEqual(["accept", "progress", "emit", "end"])
    }))

  it.scopedLive("a lost event subscription fails the run with NodeDisconnected (logged with its cause) and cancels it on the node", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url())
      const { node } = yield* makeNode(bus, "n1", { tokenDelayMs: 20 })
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      // The edge's connection, with a hand on the run's subscription's error callback (as the client calls it
      // when the server ends a subscription).
      let lose: ((error: NatsBus.BusError) => void) | undefined
      const watched: NatsBus.NatsConnection.Service = {
        ...edge.conn,
        subscribeCallback: (subject, onMessage, onError) => {
          lose = onError
          return edge.conn.subscribeCallback(subject, onMessage, onError)
        }
      }
      const logs: Array<{ readonly message: unknown; readonly annotations: Record<string, unknown> }> = []
      const logger = Logger.make(({ annotations, message }) =>
        logs.push({ message, annotations: Object.fromEntries(HashMap.toEntries(annotations)) })
      )
      const sink = new Recorder()
      const scope = yield* Scope.make()
      const runId = RunId.make("run_lost")
      yield* EdgeTransport.remoteStart(watched, { edgeId: "e1", nodeId: NodeId.make("n1"), replyTimeoutMs: NODE_TIMEOUT_MS })(
        runId,
        request(LONG_TEXT),
        sink
      ).pipe(Scope.extend(scope), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      yield* sink.received(2)
      expect(yield* node.activeRuns).toBe(1)
      lose?.(new NatsBus.BusError({ operation: "subscribe", subject: "x", reason: "Permissions Violation" }))
      const outcome = yield* sink.done
      expect(outcome).toMatchObject({ _tag: "NodeDisconnected", nodeId: "n1" })
      expect(sink.events.filter(RunEvent.isTerminal)).toEqual([])
      expect(sink.calls.at(-1)).toBe("fail")
      yield* waitFor(Effect.sync(() => logs.length), (n) => n >= 1)
      const line = logs.find((l) => String(l.message).includes("lost the run's event subscription"))
      expect(line?.annotations).toMatchObject({ runId, nodeId: "n1" })
      expect(String(line?.annotations["error"])).toContain("Permissions Violation")
      // The run's scope closes (as the run plane's fail does): the node hears RunCancel and stops.
      yield* Scope.close(scope, Exit.void)
      yield* waitFor(node.activeRuns, (n) => n === 0)
    }))
})
