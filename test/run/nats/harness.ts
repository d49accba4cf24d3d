import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { afterAll, beforeAll } from "@effect/vitest"
import { type NatsServer, startNatsServer } from "../../support/natsServer.js"
import type { Msg } from "@nats-io/transport-node"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { ModelConfig, modelOptions } from "../../../src/config/EdgeConfig.js"
import * as Node from "../../../src/node/Node.js"
import type { Provider } from "../../../src/providers/Provider.js"
import { NodeDisconnected, type RunError } from "../../../src/protocol/errors.js"
import * as NodeRegistry from "../../../src/run/NodeRegistry.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import { NodeId, type RunId } from "../../../src/protocol/RunEvent.js"
import * as RunService from "../../../src/run/RunService.js"
import type { RunSink } from "../../../src/protocol/RunSink.js"
import type { SubmitRunRequest } from "../../../src/protocol/SubmitRunRequest.js"
import * as EdgeTransport from "../../../src/run/nats/EdgeTransport.js"
import * as NatsBus from "../../../src/node/nats/NatsBus.js"
import * as NodeServer from "../../../src/node/nats/NodeServer.js"
import { decodeRunEvents } from "../../../src/node/nats/eventsWire.js"
import * as P from "../../../src/node/nats/protocol.js"

export const NODE_TIMEOUT_MS = 600

/** One nats-server for the test file: started before its tests, stopped after them. */
export const natsServerForFile = (): { readonly url: () => string; readonly restart: NatsServer["restart"] } => {
  let server: NatsServer | undefined
  beforeAll(async () => {
    server = await startNatsServer()
  })
  afterAll(async () => {
    await server?.stop()
  })
  return { url: () => server?.url ?? "", restart: (downMs) => server?.restart(downMs) ?? Promise.resolve() }
}

let prefixes = 0
/** A bus config with its own subject prefix, so tests sharing one server do not hear each other. */
export const busConfig = (url: string, options: { readonly nodeTimeoutMs?: number } = {}): NatsBus.BusConfig =>
  Schema.decodeUnknownSync(NatsBus.BusConfig)({
    nats: { servers: [url], subjectPrefix: `t${process.pid}.p${++prefixes}` },
    nodeTimeoutMs: options.nodeTimeoutMs ?? NODE_TIMEOUT_MS
  })

const tuning: NatsBus.ClientTuning = { reconnectTimeWaitMs: 100 }

export const echoModelConfig = (tokenDelayMs: number, id = "echo"): ModelConfig =>
  Schema.decodeUnknownSync(ModelConfig)({ id, provider: { type: "echo", tokenDelayMs } })

export const request = (text: string, model = "echo"): SubmitRunRequest => ({
  model,
  messages: [{ role: "user", content: text }],
  tools: [],
  sampling: {},
  metadata: {}
})

export const LONG_TEXT = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ")

let runs = 0
export const newRunId = (): RunId => RunEvent.RunId.make(`run_t${++runs}`)

export type Outcome = "end" | RunError

/**
 * A run's sink as the run plane would hold it, recording each batch as it
 * came. Waiting is by event (a deferred per waiter), never by sleeping.
 */
export class Recorder implements RunSink {
  readonly batches: Array<ReadonlyArray<RunEvent.RunEvent>> = []
  private readonly outcome = Deferred.unsafeMake<Outcome>(FiberId.none)
  private readonly waiters: Array<{ readonly n: number; readonly ready: Deferred.Deferred<void> }> = []
  private ended = false

  /** The sink's calls, in order (one `emit` per batch). */
  readonly calls: Array<"accept" | "emit" | "progress" | "end" | "fail"> = []
  private readonly acceptedNow = Deferred.unsafeMake<void>(FiberId.none)

  readonly emit = (events: ReadonlyArray<RunEvent.RunEvent>): boolean => {
    if (this.ended) return true
    this.calls.push("emit")
    this.batches.push([...events])
    this.wake()
    return true
  }
  accepted = false
  readonly accept = (): void => {
    this.calls.push("accept")
    this.accepted = true
    Deferred.unsafeDone(this.acceptedNow, Exit.void)
  }
  /** Waits until `accept` was called. */
  readonly acceptedYet: Effect.Effect<void> = Effect.suspend(() => Deferred.await(this.acceptedNow))
  readonly progress = (): void => {
    this.calls.push("progress")
  }
  readonly end = (): void => {
    this.calls.push("end")
    this.finish("end")
  }
  readonly fail = (error: RunError): void => {
    this.calls.push("fail")
    this.finish(error)
  }
  readonly onReady = (): void => {}

  get events(): ReadonlyArray<RunEvent.RunEvent> {
    return this.batches.flat()
  }

  /** How the run ended: `end()` or the error given to `fail`. */
  readonly done: Effect.Effect<Outcome> = Effect.suspend(() => Deferred.await(this.outcome))

  /** Waits until at least `n` events arrived. */
  readonly received = (n: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (this.events.length >= n) return Effect.void
      const ready = Deferred.unsafeMake<void>(FiberId.none)
      this.waiters.push({ n, ready })
      return Deferred.await(ready)
    })

  private finish(outcome: Outcome) {
    if (this.ended) return
    this.ended = true
    Deferred.unsafeDone(this.outcome, Exit.succeed(outcome))
    for (const w of this.waiters) Deferred.unsafeDone(w.ready, Exit.void)
  }

  private wake() {
    const count = this.events.length
    for (const w of this.waiters) if (count >= w.n) Deferred.unsafeDone(w.ready, Exit.void)
  }
}

/** One edge: its own bus connection, registry, run service and discovery (as a separate process would have). */
export const makeEdge = (bus: NatsBus.BusConfig, edgeId: string) =>
  Effect.gen(function* () {
    const conn = yield* NatsBus.make(bus, { ...tuning, name: edgeId })
    const registry = yield* NodeRegistry.make
    const runs = yield* RunService.make({ idleTimeoutMs: 60_000 }).pipe(Effect.provideService(NodeRegistry.NodeRegistry, registry))
    yield* EdgeTransport.discover({ bus, edgeId }).pipe(
      Effect.provideService(NatsBus.NatsConnection, conn),
      Effect.provideService(NodeRegistry.NodeRegistry, registry)
    )
    return { edgeId, conn, registry, runs }
  })

export type Edge = Effect.Effect.Success<ReturnType<typeof makeEdge>>

/**
 * Starts a run the way the run plane does: a slot on the least busy node,
 * node loss failing the sink, everything held by the caller's scope
 * (closing it cancels the run).
 */
export const startRun = (edge: Edge, req: SubmitRunRequest, runId: RunId = newRunId()) =>
  Effect.gen(function* () {
    const lease = yield* edge.registry.acquire(req.model)
    const sink = new Recorder()
    lease.onGone(() => sink.fail(new NodeDisconnected({ nodeId: lease.node.id })))
    yield* lease.node.start(runId, req, sink)
    return { nodeId: lease.node.id, runId, sink }
  })

/** A run on `node` in this process (no bus), to its end. */
export const runLocally = (node: Node.Node, req: SubmitRunRequest) =>
  Effect.scoped(
    Effect.gen(function* () {
      const sink = new Recorder()
      yield* node.execute(newRunId(), req, sink)
      yield* sink.done
      return sink
    })
  )

/** A node made of hand-written providers, by model id (the announced configs are echo ones of the same ids). */
export const nodeOf = (id: string, providers: Readonly<Record<string, Provider>>, maxConcurrentRuns = 4): Node.Node => {
  let active = 0
  return {
    id: NodeId.make(id),
    models: Object.keys(providers).map((m) => modelOptions(m)),
    maxConcurrentRuns,
    execute: (_runId, req, sink) => {
      const provider = providers[req.model]
      if (provider === undefined) return Effect.sync(() => void sink.emit([RunEvent.failed("no such model")]))
      return Effect.acquireRelease(Effect.sync(() => (active += 1)), () => Effect.sync(() => (active -= 1))).pipe(
        Effect.zipRight(provider.start(req, sink))
      )
    },
    activeRuns: Effect.sync(() => active)
  }
}

/** Serves `node` over the bus in a scope of its own: close `scope` to shut it down gracefully. */
export const serveNode = (
  bus: NatsBus.BusConfig,
  node: Node.Node,
  options: {
    readonly drainTimeoutMs?: number
    readonly refreshModels?: NodeServer.ServeOptions["refreshModels"]
  } = {}
) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
    const conn = yield* NatsBus.make(bus, { ...tuning, name: node.id }).pipe(Scope.extend(scope))
    yield* NodeServer.serve(node, {
      bus,
      nodeId: node.id,
      ...(options.drainTimeoutMs !== undefined ? { drainTimeoutMs: options.drainTimeoutMs } : {}),
      ...(options.refreshModels !== undefined ? { refreshModels: options.refreshModels } : {})
    }).pipe(Effect.provideService(NatsBus.NatsConnection, conn), Scope.extend(scope))
    return { node, conn, scope }
  })

/** One node serving an echo model (built by `Node.make`, as `iop node` does), in its own scope. */
export const makeNode = (
  bus: NatsBus.BusConfig,
  id: string,
  options: { readonly maxConcurrentRuns?: number; readonly tokenDelayMs?: number; readonly drainTimeoutMs?: number } = {}
) =>
  Effect.gen(function* () {
    const model = echoModelConfig(options.tokenDelayMs ?? 0)
    const models = yield* Node.servedFromConfig([model]).pipe(Effect.provide(NodeHttpClient.dispatcherLayer))
    const node = Node.make({ id: NodeId.make(id), models, maxConcurrentRuns: options.maxConcurrentRuns ?? 4 })
    return yield* serveNode(bus, node, {
      ...(options.drainTimeoutMs !== undefined ? { drainTimeoutMs: options.drainTimeoutMs } : {})
    })
  })

export interface WireMessage {
  readonly bytes: number
  readonly batch: ReadonlyArray<RunEvent.RunEvent>
  readonly seq: number
  readonly accepted: boolean
  readonly end: boolean
}

/** Records the run-events messages an edge receives, as they are on the wire (not the node's replies, sent there too). */
export const spyEvents = (conn: NatsBus.NatsConnection.Service, edgeId: string) =>
  Effect.gen(function* () {
    const messages: Array<WireMessage> = []
    const subject = P.subjects(conn.subjectPrefix).events(edgeId, "*", "*")
    yield* conn.subscribeCallback(subject, (msg: Msg) => {
      if (P.decode.runReply(msg.data)._tag === "Ok") return
      const decoded = decodeRunEvents(msg.data)
      const m = decoded._tag === "Ok" ? decoded.value : undefined
      messages.push({
        bytes: msg.data.length,
        batch: m?.events ?? [],
        seq: m?.seq ?? -1,
        accepted: m?.accepted === true,
        end: m?.end === true
      })
    }, () => {}).pipe(Effect.orDie)
    // The server has the interest before anything is published.
    yield* conn.flush.pipe(Effect.orDie)
    return messages
  })

/** Polls `check` until `until` holds; `ms` only turns a hang into a clear failure (generous by default). */
export const waitFor = <A>(check: Effect.Effect<A>, until: (a: A) => boolean, ms = 20_000) =>
  check.pipe(
    Effect.repeat({ schedule: Schedule.spaced(Duration.millis(20)), until }),
    Effect.timeoutFail({ duration: Duration.millis(ms), onTimeout: () => new Error(`condition not met within ${ms} ms`) }),
    Effect.orDie
  )

export const nodesOf = (edge: { readonly registry: NodeRegistry.NodeRegistry.Service }) =>
  edge.registry.nodes.pipe(Effect.map((ns) => ns.map((n) => n.id).sort()))

export const deltaText = (events: ReadonlyArray<RunEvent.RunEvent>, tag: "Delta" | "ReasoningDelta" = "Delta") =>
  events.map((e) => (e._tag === tag ? e.text : "")).join("")
