import type * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type { Msg } from "@nats-io/transport-node"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { randomBytes } from "node:crypto"
import type { ModelOptions } from "../../protocol/ModelOptions.js"
import type { ModelConfig } from "../ModelConfig.js"
import * as Node from "../Node.js"
import * as RunEvent from "../../protocol/RunEvent.js"
import { NodeId, type RunId } from "../../protocol/RunEvent.js"
import type { BusConfig, NodeSettings } from "./BusConfig.js"
import type { BusConnectFailed } from "./NatsBus.js"
import * as NatsBus from "./NatsBus.js"
import { NatsConnection } from "./NatsBus.js"
import { makePublisher, type RunPublisher } from "./RunPublisher.js"
import * as P from "./protocol.js"
import { continueRun } from "./runSpan.js"
import * as Tracing from "../../observability/Tracing.js"

export { NodeSettings } from "./BusConfig.js"

export interface ServeOptions {
  readonly bus: BusConfig
  readonly nodeId: NodeId
  /** On shutdown, how long runs may go on before they are cancelled (default 10 s). */
  readonly drainTimeoutMs?: number
  /**
   * The models' options read anew (`toolFormats: "auto"` from the upstream's chat template), on each reconnect to
   * the bus: a node whose upstream changed model tells its edges so.
   */
  readonly refreshModels?: Effect.Effect<ReadonlyArray<ModelOptions>>
}

interface ActiveRun {
  readonly edgeId: string
  /** Everything the run holds (the provider's fiber and upstream request, its slot); closing it stops the run. */
  readonly scope: Scope.CloseableScope
  readonly sink: RunPublisher
  /** Cancelled, its scope closing in the background. */
  stopping: boolean
}

const refusal = (
  draining: boolean,
  runs: ReadonlyMap<RunId, ActiveRun>,
  start: P.RunStart,
  models: ReadonlySet<string>,
  maxConcurrentRuns: number
): string | undefined => {
  if (draining) return "node is shutting down"
  if (!models.has(start.request.model)) return `model "${start.request.model}" is not served here`
  if (runs.has(start.runId)) return "duplicate run id"
  if (runs.size >= maxConcurrentRuns) return "at capacity"
  if (!/^[^\s*>]+$/.test(start.eventsSubject)) return "invalid events subject"
  return undefined
}

/** How long shutdown waits for cancelled runs' scopes to close (their upstream requests aborted). */
const STOP_TIMEOUT = Duration.seconds(1)

const ACCEPTED = Either.getOrThrow(P.encode.runReply({ _tag: "RunAccepted", v: P.PROTOCOL_VERSION }))

/** Closes a run's scope whole: an interruption half-way would skip the finalizers left (the slot, the upstream). */
const closeRun = (run: ActiveRun) => Effect.uninterruptible(Scope.close(run.scope, Exit.void))

/**
 * Serves `node` over NATS until the scope closes, then drains: announces
 * `draining`, refuses new runs, lets running ones finish (bounded), cancels
 * the rest (their edges get a Cancelled event) and says NodeLeave.
 */
export const serve = (
  node: Node.Node,
  options: ServeOptions
): Effect.Effect<void, never, Scope.Scope | NatsConnection> =>
  Effect.gen(function* () {
    const bus = yield* NatsConnection
    const outer = yield* Effect.scope
    if (!P.isSubjectToken(options.nodeId)) {
      return yield* Effect.dieMessage(`node id "${options.nodeId}" cannot be used in NATS subjects`)
    }
    const S = P.subjects(bus.subjectPrefix)
    const timeoutMs = options.bus.nodeTimeoutMs
    const instanceId = randomBytes(8).toString("base64url")
    const served = new Set(node.models.map((m) => m.id))
    // As the node serves them, their `"auto"` tool formats read from the upstream's template (anew: `refreshed`).
    const announcedFor = (refreshed: ReadonlyArray<ModelOptions>): ReadonlyArray<ModelOptions> => {
      const resolved = new Map(refreshed.map((m) => [m.id, m.toolFormats]))
      return node.models.map((m) => ({ ...m, toolFormats: resolved.get(m.id) ?? m.toolFormats }))
    }
    let announced = announcedFor([])
    const max = node.maxConcurrentRuns
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const clock = yield* Effect.clock
    // Forked first, so closed last: each run's scope is a child of it, and outlives the drain below.
    const runsParent = yield* Scope.fork(outer, ExecutionStrategy.parallel)
    // Plain state: every read and write is one synchronous step (callbacks change it too).
    let draining = false
    const runs = new Map<RunId, ActiveRun>()
    /** When each edge was last heard from (heartbeat or RunStart). */
    const edges = new Map<string, number>()

    const announce = Effect.suspend(() =>
      bus.publishEncoded(S.announce, P.encode.announce, {
        v: P.PROTOCOL_VERSION,
        nodeId: options.nodeId,
        instanceId,
        models: announced,
        maxConcurrentRuns: max,
        inFlight: runs.size,
        draining
      })
    ).pipe(Effect.catchAll((e) => Effect.logDebug("cannot announce the node", e.message)))

    /** Answers a RunStart at once, from the callback that heard it. */
    const reply = (msg: Msg, value: P.RunReply): void => {
      const data = P.encode.runReply(value)
      if (data._tag === "Right" && msg.reply !== undefined) bus.unsafePublish(msg.reply, data.right)
    }
    const refuse = (msg: Msg, reason: string) => reply(msg, { _tag: "RunRefused", v: P.PROTOCOL_VERSION, reason })

    /** Stops runs without waiting for them: their scopes close in the background. */
    const cancelRuns = (list: ReadonlyArray<ActiveRun>): void => {
      for (const run of list) {
        run.stopping = true
        run.sink.stop()
      }
      if (list.length > 0) runFork(Effect.forEach(list, closeRun, { concurrency: "unbounded", discard: true }))
    }

    /**
     * A run's start, in a fiber of its own begun by the inbox callback: it runs synchronously up to the provider's
     * start (the slot is taken before the callback returns, so a RunCancel after it finds the run), and a
     * provider slow to start holds up nothing else.
     */
    const startRun = (msg: Msg, start: P.RunStart, replyTo: string) =>
      Effect.flatMap(Scope.fork(runsParent, ExecutionStrategy.sequential), (scope) => {
        // Check and reserve in one step: capacity holds however many edges ask at once.
        const refused = refusal(draining, runs, start, served, max)
        if (refused !== undefined) {
          refuse(msg, refused)
          return Scope.close(scope, Exit.void)
        }
        const logs = { runId: start.runId, edgeId: start.edgeId, nodeId: options.nodeId }
        const run: ActiveRun = {
          edgeId: start.edgeId,
          scope,
          stopping: false,
          sink: makePublisher(bus, start, (error) =>
            runFork(
              (error === undefined
                ? Effect.void
                : Effect.logWarning("run stopped: its events cannot be published").pipe(
                  Effect.annotateLogs({ ...logs, error: error.message })
                )).pipe(Effect.zipRight(closeRun(run)))
            ))
        }
        runs.set(start.runId, run)
        edges.set(start.edgeId, clock.unsafeCurrentTimeMillis())
        bus.unsafePublish(replyTo, ACCEPTED)
        // Added first, so run last: the slot is given back once the provider has stopped.
        return Scope.addFinalizer(scope, Effect.sync(() => runs.get(start.runId) === run && runs.delete(start.runId))).pipe(
          Effect.zipRight(Effect.withFiberRuntime((fiber) => {
            const traced = continueRun(fiber, options.nodeId, start)
            const span = traced.span
            const execute = node.execute(start.runId, traced.request, run.sink).pipe(Scope.extend(scope))
            // The node's span of the run ends as the run's scope closes (its provider stopped).
            return span === undefined
              ? execute
              : Effect.zipRight(Scope.addFinalizer(scope, Effect.sync(() => Tracing.end(span))), execute)
          })),
          Effect.catchAllCause((cause) =>
            Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logError("run failed to start", cause).pipe(
              Effect.zipRight(Effect.sync(() => run.sink.emit([RunEvent.failed("the node failed to start the run")])))
            )
          ),
          Effect.annotateLogs(logs)
        )
      })

    const onRunStart = (msg: Msg): void => {
      const decoded = P.decode.runStart(msg.data)
      if (decoded._tag !== "Ok") return refuse(msg, P.describeRejection(decoded))
      if (msg.reply === undefined) return
      runFork(startRun(msg, decoded.value, msg.reply))
    }

    const onCancel = (msg: Msg): void => {
      const decoded = P.decode.runCancel(msg.data)
      if (decoded._tag !== "Ok") return void runFork(Effect.logDebug("ignored a RunCancel", P.describeRejection(decoded)))
      const run = runs.get(decoded.value.runId)
      if (run !== undefined) cancelRuns([run])
    }

    const onCredit = (msg: Msg): void => {
      const decoded = P.decode.runCredit(msg.data)
      if (decoded._tag !== "Ok") return void runFork(Effect.logDebug("ignored a RunCredit", P.describeRejection(decoded)))
      runs.get(decoded.value.runId)?.sink.credit(decoded.value.granted)
    }

    const onEdgeHeartbeat = (msg: Msg) =>
      Effect.gen(function* () {
        const decoded = P.decode.edgeHeartbeat(msg.data)
        if (decoded._tag !== "Ok") return
        const now = yield* Clock.currentTimeMillis
        const isNew = !edges.has(decoded.value.edgeId)
        edges.set(decoded.value.edgeId, now)
        // A new edge learns about this node at once instead of at the next heartbeat.
        if (isNew) yield* announce
      })

    // Runs whose edge went silent: nobody reads their events, so stop paying for their upstream.
    const watchEdges = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const orphans = Array.from(runs).filter(([, run]) =>
        !run.stopping && now - (edges.get(run.edgeId) ?? 0) > timeoutMs
      )
      for (const [runId, run] of orphans) {
        yield* Effect.logWarning("edge missed its heartbeats; cancelling its run").pipe(
          Effect.annotateLogs({ runId, edgeId: run.edgeId })
        )
      }
      cancelRuns(orphans.map(([, run]) => run))
      const busy = new Set(Array.from(runs.values(), (r) => r.edgeId))
      for (const [id, seen] of edges) if (!busy.has(id) && now - seen > 10 * timeoutMs) edges.delete(id)
    })

    const runSubject = S.run(options.nodeId)
    const creditSubject = S.credit(options.nodeId)
    const cancelSubject = S.cancel(options.nodeId)
    // One subscription for all, in order: a RunCancel or RunCredit is never handled before its RunStart.
    yield* bus.subscribeCallback(
      S.nodeInbox(options.nodeId),
      (msg) =>
        msg.subject === creditSubject
          ? onCredit(msg)
          : msg.subject === runSubject
          ? onRunStart(msg)
          : msg.subject === cancelSubject
          ? onCancel(msg)
          : undefined,
      (e) => runFork(Effect.logError("node inbox subscription ended").pipe(Effect.annotateLogs({ error: e.message })))
    ).pipe(Effect.orDie)
    const edgeBeats = yield* bus.subscribe(S.edgeHeartbeat).pipe(Effect.orDie)
    yield* edgeBeats.pipe(
      Stream.runForEach(onEdgeHeartbeat),
      Effect.catchAll((e) =>
        Effect.logError("edge heartbeat subscription ended").pipe(Effect.annotateLogs({ error: e.message }))
      ),
      Effect.forkScoped
    )
    const tick = Duration.millis(Math.max(10, Math.floor(timeoutMs / 3)))
    const announcer = yield* announce.pipe(Effect.repeat(Schedule.spaced(tick)), Effect.forkScoped)
    const refresh = options.refreshModels
    if (refresh !== undefined) {
      // Read anew in a fiber of its own (an upstream may take seconds to answer), then told at once.
      yield* bus.onReconnect(() => {
        runFork(Effect.flatMap(refresh, (models) => Effect.suspend(() => {
          announced = announcedFor(models)
          return announce
        })))
      })
    }
    yield* watchEdges.pipe(Effect.repeat(Schedule.spaced(tick)), Effect.forkScoped)

    const waitForRuns = (ms: number) =>
      Effect.sync(() => runs.size).pipe(
        Effect.repeat({ schedule: Schedule.spaced(Duration.millis(20)), until: (n) => n === 0 }),
        // Finalizers are uninterruptible: without this the timeout could not stop the wait.
        Effect.interruptible,
        Effect.timeout(Duration.millis(ms)),
        Effect.ignore
      )

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        draining = true
        yield* announce
        yield* waitForRuns(options.drainTimeoutMs ?? 10_000)
        const left = Array.from(runs.values())
        // The edges hear first (published at once, whoever reads), then every run stops at the same time.
        for (const run of left) run.sink.stop("node shutting down")
        yield* Effect.forEach(left, closeRun, { concurrency: "unbounded", discard: true }).pipe(
          // A provider that will not stop does not hold up the node's leaving: it goes on closing in the background.
          Effect.disconnect,
          Effect.interruptible,
          Effect.timeout(STOP_TIMEOUT),
          Effect.ignore
        )
        yield* Fiber.interrupt(announcer)
        const leave: P.NodeLeave = { v: P.PROTOCOL_VERSION, nodeId: options.nodeId, instanceId }
        yield* bus.publishEncoded(S.leave, P.encode.leave, leave).pipe(
          Effect.zipRight(bus.flush.pipe(Effect.interruptible, Effect.timeout(Duration.seconds(1)))),
          Effect.ignore
        )
        yield* Effect.logInfo("node left the bus")
      }).pipe(Effect.annotateLogs({ nodeId: options.nodeId }))
    )
    yield* Effect.logInfo("node serving over NATS").pipe(
      Effect.annotateLogs({ nodeId: options.nodeId, models: node.models.map((m) => m.id).join(","), subject: runSubject })
    )
  })

/**
 * A node on the bus: the config's models with their built-in providers, and `providers` (models served by
 * providers of your own), hosted and served until the layer is released (then it drains as `serve` describes).
 * What `iop node` runs, and `iop-edge/nats`'s `layerNode`.
 */
export const layer = (options: {
  readonly bus: BusConfig
  readonly node: NodeSettings
  readonly models: ReadonlyArray<ModelConfig>
  readonly providers?: ReadonlyArray<Node.ServedModel>
  readonly drainTimeoutMs?: number
}): Layer.Layer<never, BusConnectFailed, NodeHttpClient.Dispatcher> =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const nodeId = NodeId.make(options.node.id)
      const node = Node.make({
        id: nodeId,
        models: [...(yield* Node.servedFromConfig(options.models)), ...(options.providers ?? [])],
        maxConcurrentRuns: options.node.maxConcurrentRuns
      })
      const dispatcher = yield* Effect.context<NodeHttpClient.Dispatcher>()
      yield* serve(node, {
        bus: options.bus,
        nodeId,
        refreshModels: Effect.forEach(options.models, Node.resolveFromUpstream).pipe(Effect.provide(dispatcher)),
        ...(options.drainTimeoutMs !== undefined ? { drainTimeoutMs: options.drainTimeoutMs } : {})
      })
    })
  ).pipe(Layer.provide(NatsBus.layer(options.bus, { name: `iop-node-${options.node.id}` })))
