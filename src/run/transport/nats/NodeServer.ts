import type * as HttpClient from "@effect/platform/HttpClient"
import type { Msg } from "@nats-io/transport-node"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { randomBytes } from "node:crypto"
import type { ModelConfig } from "../../../config/EdgeConfig.js"
import * as Node from "../../../node/Node.js"
import * as RunEvent from "../../RunEvent.js"
import { NodeId, type RunId } from "../../RunEvent.js"
import type { BusConfig, NodeSettings } from "./BusConfig.js"
import type { BusConnectFailed } from "./NatsBus.js"
import * as NatsBus from "./NatsBus.js"
import { NatsConnection } from "./NatsBus.js"
import * as P from "./protocol.js"

export { NodeSettings } from "./BusConfig.js"

export interface ServeOptions {
  readonly bus: BusConfig
  readonly nodeId: NodeId
  /** The configs of the node's models, announced (without upstream secrets) so edges apply their output options. */
  readonly models: ReadonlyArray<ModelConfig>
  /** On shutdown, how long runs may go on before they are cancelled (default 10 s). */
  readonly drainTimeoutMs?: number
}

interface CancelReason {
  readonly message: string
  /** Tell the edge with a Cancelled event (shutdown); an edge that cancelled or vanished needs nothing. */
  readonly notify: boolean
}

interface ActiveRun {
  readonly edgeId: string
  readonly cancel: Deferred.Deferred<CancelReason>
}

interface State {
  readonly draining: boolean
  readonly runs: ReadonlyMap<RunId, ActiveRun>
  /** When each edge was last heard from (heartbeat or RunStart). */
  readonly edges: ReadonlyMap<string, number>
}

const refusal = (
  state: State,
  start: P.RunStart,
  models: ReadonlySet<string>,
  maxConcurrentRuns: number
): string | undefined => {
  if (state.draining) return "node is shutting down"
  if (!models.has(start.request.model)) return `model "${start.request.model}" is not served here`
  if (state.runs.has(start.runId)) return "duplicate run id"
  if (state.runs.size >= maxConcurrentRuns) return "at capacity"
  if (!/^[^\s*>]+$/.test(start.eventsSubject)) return "invalid events subject"
  return undefined
}

const removeRun = (runId: RunId) => (s: State): State => {
  const runs = new Map(s.runs)
  runs.delete(runId)
  return { ...s, runs }
}

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
    const served = new Set(node.models)
    const announced = options.models.filter((m) => served.has(m.id)).map(P.publicModel)
    const max = node.maxConcurrentRuns
    // Created first, so closed last: leftover runs are interrupted only after the drain below.
    const runScope = yield* Scope.fork(outer, ExecutionStrategy.parallel)
    const state = yield* Ref.make<State>({ draining: false, runs: new Map(), edges: new Map() })

    const announce = Ref.get(state).pipe(
      Effect.flatMap((s) =>
        bus.publishEncoded(S.announce, P.encode.announce, {
          v: 1,
          nodeId: options.nodeId,
          instanceId,
          models: announced,
          maxConcurrentRuns: max,
          inFlight: s.runs.size,
          draining: s.draining
        })
      ),
      Effect.catchAll((e) => Effect.logDebug("cannot announce the node", e.message))
    )

    const reply = (msg: Msg, value: P.RunReply) =>
      Effect.suspend(() => {
        const data = P.encode.runReply(value)
        return data._tag === "Right" && msg.reply !== undefined
          ? bus.publish(msg.reply, data.right)
          : Effect.void
      }).pipe(Effect.ignore)

    const runOne = (start: P.RunStart, cancel: Deferred.Deferred<CancelReason>) =>
      Effect.gen(function* () {
        const seq = yield* Ref.make(0)
        const ended = yield* Ref.make(false)
        const send = (event: RunEvent.RunEvent) =>
          Ref.getAndUpdate(seq, (n) => n + 1).pipe(
            Effect.flatMap((n) =>
              bus.publishEncoded(start.eventsSubject, P.encode.runEvent, { v: 1, runId: start.runId, seq: n, event })
            ),
            Effect.zipRight(RunEvent.isTerminal(event) ? Ref.set(ended, true) : Effect.void)
          )
        // One race for the whole run (not a per-event merge); the loser, the node's stream, is interrupted,
        // which aborts the provider's upstream request.
        yield* node.execute(start.runId, start.request).pipe(
          Stream.runForEach(send),
          Effect.raceFirst(Deferred.await(cancel).pipe(Effect.asVoid))
        )
        if ((yield* Deferred.isDone(cancel)) && !(yield* Ref.get(ended))) {
          const reason = yield* Deferred.await(cancel)
          if (reason.notify) yield* send(RunEvent.cancelled(reason.message))
        }
      }).pipe(
        // A publish that fails means the edge can no longer hear this run: stop it rather than run blind.
        Effect.catchAll((e) =>
          Effect.logWarning("run stopped: its events cannot be published").pipe(
            Effect.annotateLogs({ error: e.message })
          )
        ),
        Effect.ensuring(Ref.update(state, removeRun(start.runId))),
        Effect.annotateLogs({ runId: start.runId, edgeId: start.edgeId, nodeId: options.nodeId })
      )

    const onRunStart = (msg: Msg) =>
      Effect.gen(function* () {
        const decoded = P.decode.runStart(msg.data)
        if (decoded._tag !== "Ok") {
          return yield* reply(msg, { _tag: "RunRefused", v: 1, reason: P.describeRejection(decoded) })
        }
        const start = decoded.value
        if (msg.reply === undefined) return
        const now = yield* Clock.currentTimeMillis
        const cancel = yield* Deferred.make<CancelReason>()
        // Check and reserve in one step: capacity holds however many edges ask at once.
        const refused = yield* Ref.modify(state, (s): readonly [string | undefined, State] => {
          const reason = refusal(s, start, served, max)
          if (reason !== undefined) return [reason, s]
          return [undefined, {
            ...s,
            runs: new Map(s.runs).set(start.runId, { edgeId: start.edgeId, cancel }),
            edges: new Map(s.edges).set(start.edgeId, now)
          }]
        })
        if (refused !== undefined) return yield* reply(msg, { _tag: "RunRefused", v: 1, reason: refused })
        yield* reply(msg, { _tag: "RunAccepted", v: 1 })
        yield* Effect.forkIn(runOne(start, cancel), runScope)
      })

    const cancelRun = (runId: RunId, reason: CancelReason) =>
      Ref.get(state).pipe(
        Effect.flatMap((s) => {
          const run = s.runs.get(runId)
          return run === undefined ? Effect.void : Deferred.succeed(run.cancel, reason)
        }),
        Effect.asVoid
      )

    const onCancel = (msg: Msg) => {
      const decoded = P.decode.runCancel(msg.data)
      return decoded._tag === "Ok"
        ? cancelRun(decoded.value.runId, { message: decoded.value.reason, notify: false })
        : Effect.logDebug("ignored a RunCancel", P.describeRejection(decoded))
    }

    const onEdgeHeartbeat = (msg: Msg) =>
      Effect.gen(function* () {
        const decoded = P.decode.edgeHeartbeat(msg.data)
        if (decoded._tag !== "Ok") return
        const now = yield* Clock.currentTimeMillis
        const isNew = yield* Ref.modify(state, (s) => [
          !s.edges.has(decoded.value.edgeId),
          { ...s, edges: new Map(s.edges).set(decoded.value.edgeId, now) }
        ])
        // A new edge learns about this node at once instead of at the next heartbeat.
        if (isNew) yield* announce
      })

    // Runs whose edge went silent: nobody reads their events, so stop paying for their upstream.
    const watchEdges = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const s = yield* Ref.get(state)
      for (const [runId, run] of s.runs) {
        if (now - (s.edges.get(run.edgeId) ?? 0) > timeoutMs) {
          yield* Effect.logWarning("edge missed its heartbeats; cancelling its run").pipe(
            Effect.annotateLogs({ runId, edgeId: run.edgeId })
          )
          yield* Deferred.succeed(run.cancel, { message: "edge gone", notify: false })
        }
      }
      const busy = new Set(Array.from(s.runs.values(), (r) => r.edgeId))
      yield* Ref.update(state, (st) => ({
        ...st,
        edges: new Map(Array.from(st.edges).filter(([id, seen]) => busy.has(id) || now - seen <= 10 * timeoutMs))
      }))
    })

    const inbox = yield* bus.subscribe(S.nodeInbox(options.nodeId)).pipe(Effect.orDie)
    const edgeBeats = yield* bus.subscribe(S.edgeHeartbeat).pipe(Effect.orDie)
    const run = S.run(options.nodeId)
    yield* inbox.pipe(
      Stream.runForEach((msg) => (msg.subject === run ? onRunStart(msg) : onCancel(msg))),
      Effect.catchAll((e) =>
        Effect.logError("node inbox subscription ended").pipe(Effect.annotateLogs({ error: e.message }))
      ),
      Effect.forkScoped
    )
    yield* edgeBeats.pipe(
      Stream.runForEach(onEdgeHeartbeat),
      Effect.catchAll((e) =>
        Effect.logError("edge heartbeat subscription ended").pipe(Effect.annotateLogs({ error: e.message }))
      ),
      Effect.forkScoped
    )
    const tick = Duration.millis(Math.max(10, Math.floor(timeoutMs / 3)))
    const announcer = yield* announce.pipe(Effect.repeat(Schedule.spaced(tick)), Effect.forkScoped)
    yield* watchEdges.pipe(Effect.repeat(Schedule.spaced(tick)), Effect.forkScoped)

    const runsLeft = Ref.get(state).pipe(Effect.map((s) => s.runs.size))
    const waitForRuns = (ms: number) =>
      runsLeft.pipe(
        Effect.repeat({ schedule: Schedule.spaced(Duration.millis(20)), until: (n) => n === 0 }),
        // Finalizers are uninterruptible: without this the timeout could not stop the wait.
        Effect.interruptible,
        Effect.timeout(Duration.millis(ms)),
        Effect.ignore
      )

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* Ref.update(state, (s) => ({ ...s, draining: true }))
        yield* announce
        yield* waitForRuns(options.drainTimeoutMs ?? 10_000)
        const left = yield* Ref.get(state)
        yield* Effect.forEach(
          left.runs.values(),
          (r) => Deferred.succeed(r.cancel, { message: "node shutting down", notify: true }),
          { discard: true }
        )
        yield* waitForRuns(1000)
        yield* Fiber.interrupt(announcer)
        yield* bus.publishEncoded(S.leave, P.encode.leave, { v: 1, nodeId: options.nodeId, instanceId }).pipe(
          Effect.zipRight(bus.flush.pipe(Effect.interruptible, Effect.timeout(Duration.seconds(1)))),
          Effect.ignore
        )
        yield* Effect.logInfo("node left the bus")
      }).pipe(Effect.annotateLogs({ nodeId: options.nodeId }))
    )
    yield* Effect.logInfo("node serving over NATS").pipe(
      Effect.annotateLogs({ nodeId: options.nodeId, models: node.models.join(","), subject: run })
    )
  })

/**
 * `iop node`: connects to the bus, hosts the models' providers and serves
 * them until the layer is released (then drains as `serve` describes).
 */
export const nodeLayer = (options: {
  readonly bus: BusConfig
  readonly node: NodeSettings
  readonly models: ReadonlyArray<ModelConfig>
  readonly drainTimeoutMs?: number
}): Layer.Layer<never, BusConnectFailed, HttpClient.HttpClient> =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const nodeId = NodeId.make(options.node.id)
      const node = yield* Node.make({
        id: nodeId,
        models: options.models,
        maxConcurrentRuns: options.node.maxConcurrentRuns
      })
      yield* serve(node, {
        bus: options.bus,
        nodeId,
        models: options.models,
        ...(options.drainTimeoutMs !== undefined ? { drainTimeoutMs: options.drainTimeoutMs } : {})
      })
    })
  ).pipe(Layer.provide(NatsBus.layer(options.bus, { name: `iop-node-${options.node.id}` })))
