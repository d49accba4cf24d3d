import type { Msg } from "@nats-io/transport-node"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SynchronizedRef from "effect/SynchronizedRef"
import { randomBytes } from "node:crypto"
import { NodeDisconnected, NodeUnavailable, RunRequestTooLarge } from "../../protocol/errors.js"
import { type NodeConnection, NodeRegistry } from "../NodeRegistry.js"
import * as RunEvent from "../../protocol/RunEvent.js"
import type { NodeId, RunId } from "../../protocol/RunEvent.js"
import type { RunSink } from "../../protocol/RunSink.js"
import type { SubmitRunRequest } from "../../protocol/SubmitRunRequest.js"
import type { BusConfig } from "../../node/nats/BusConfig.js"
import type { BusConnectFailed, BusError } from "../../node/nats/NatsBus.js"
import * as NatsBus from "../../node/nats/NatsBus.js"
import { NatsConnection } from "../../node/nats/NatsBus.js"
import * as C from "../../node/nats/credit.js"
import { decodeRunEvents } from "../../node/nats/eventsWire.js"
import * as P from "../../node/nats/protocol.js"

export { NodeUnavailable }

export interface RemoteNode {
  readonly edgeId: string
  readonly nodeId: NodeId
  /** How long to wait for the node's Accepted / Refused. */
  readonly replyTimeoutMs: number
}

/**
 * Starts a run on a node, its events into `sink`. Subscribes to the run's
 * events subject (a callback: no queue, no fiber) and sends the RunStart with
 * that subject as its reply subject, so the node's Accepted / Refused and
 * then its events arrive in order on one subscription (and the server's "no
 * responders" too); a refusal, no reply in time or a request too big for the
 * bus fails with NodeUnavailable. Each message is decoded once and
 * sequence-checked, and goes into the sink as it came (`accepted`, its batch
 * whole, then `end`): the run's channel is the one terminator. An unreadable
 * message, another run's, or a lost or repeated one ends the run with Failed
 * instead of emitting wrong text; a lost subscription is the node's loss
 * (`NodeDisconnected`). The node publishes within the credit this side grants
 * (credit.ts): a message the sink took is consumed at once, and after one it
 * did not (`emit` answered `false`), granting waits for the sink's `onReady`.
 * Closing the scope before the node finished (the caller left, the run was
 * not trusted, a late accept after a timeout) sends RunCancel, which aborts
 * the node's upstream request.
 */
export const remoteStart = (bus: NatsConnection.Service, remote: RemoteNode) => {
  const S = P.subjects(bus.subjectPrefix)
  const runSubject = S.run(remote.nodeId)
  const cancelSubject = S.cancel(remote.nodeId)
  const creditSubject = S.credit(remote.nodeId)
  const window = C.CREDIT_WINDOW
  const unavailable = (reason: string) => new NodeUnavailable({ nodeId: remote.nodeId, reason })
  return (
    runId: RunId,
    request: SubmitRunRequest,
    sink: RunSink
  ): Effect.Effect<void, NodeUnavailable | RunRequestTooLarge, Scope.Scope> =>
    Effect.suspend((): Effect.Effect<void, NodeUnavailable | RunRequestTooLarge, Scope.Scope> => {
      const eventsSubject = S.events(remote.edgeId, runId, remote.nodeId)
      const start = P.encode.runStart({
        v: P.PROTOCOL_VERSION,
        runId,
        edgeId: remote.edgeId,
        request,
        eventsSubject,
        window
      })
      if (Either.isLeft(start)) return Effect.fail(unavailable(`cannot encode the run: ${start.left}`))
      const maxPayload = bus.maxPayload()
      if (start.right.length > maxPayload) {
        // Too large for every node on this bus alike: a 413, not a refusal worth retrying elsewhere.
        return Effect.fail(new RunRequestTooLarge({ bytes: start.right.length, limit: maxPayload }))
      }

      // Plain state: every callback below runs synchronously on the client's callback (or the sink's).
      let seq = P.initial()
      // The node finished the run (sent its terminal event or its last message) or never took it: nothing to cancel.
      let nodeDone = false
      // The sink was ended or failed: later messages are dropped, no credit is granted.
      let closed = false
      // Credit: bytes of run-events messages the sink took, of those it took while behind, and granted in all.
      let consumed = 0
      let held = 0
      let granted = window
      // Until the node's answer came: how to hand it to the waiting start.
      let answer: ((outcome: Effect.Effect<void, NodeUnavailable>) => void) | undefined
      let answered = false
      let timer: ReturnType<typeof setTimeout> | undefined
      // For the log line of a lost subscription (a callback has no fiber): the run's, with its annotations.
      let log: ((effect: Effect.Effect<void>) => void) | undefined
      const settle = (outcome: Effect.Effect<void, NodeUnavailable>) => {
        if (answered) return
        answered = true
        clearTimeout(timer)
        const resume = answer
        answer = undefined
        resume?.(outcome)
      }
      const accepted = () => settle(Effect.void)
      // A start that failed writes nothing more into the sink: the run's next attempt, on another node, uses it.
      const refused = (reason: string) => {
        if (answered) return
        closed = true
        settle(Effect.fail(unavailable(reason)))
      }
      const endWith = (message: string) => {
        if (closed) return
        closed = true
        sink.emit([RunEvent.failed(message)])
        sink.end()
      }
      const grant = () => {
        const next = C.regrant(consumed, granted, window)
        if (next === granted) return
        granted = next
        const credit = P.encode.runCredit({ v: P.PROTOCOL_VERSION, runId, granted })
        // Not sent (the connection is closing): the node waits, and node loss or the watchdogs end the run.
        if (Either.isRight(credit)) bus.unsafePublish(creditSubject, credit.right)
      }
      const ready = () => {
        consumed += held
        held = 0
        if (!closed) grant()
      }
      const onReply = (msg: Msg) => {
        if (NatsBus.isNoResponders(msg)) {
          nodeDone = true
          return refused("not listening")
        }
        const decoded = P.decode.runReply(msg.data)
        if (decoded._tag !== "Ok") return refused(`bad reply: ${P.describeRejection(decoded)}`)
        if (decoded.value._tag === "RunAccepted") return accepted()
        nodeDone = true
        refused(decoded.value.reason)
      }
      const onMessage = (msg: Msg) => {
        if (!answered) return onReply(msg)
        if (closed) return
        const decoded = decodeRunEvents(msg.data)
        if (decoded._tag !== "Ok") {
          return endWith(`node ${remote.nodeId} sent an unreadable event: ${P.describeRejection(decoded)}`)
        }
        const m = decoded.value
        if (m.runId !== runId) return endWith(`node ${remote.nodeId} sent an event of another run`)
        const next = P.accept(seq, m.seq)
        if (next._tag !== "Ok") return endWith(P.describeSeqError(next))
        seq = next.state
        if (m.whole !== undefined) sink.awaitWhole?.(m.whole)
        if (m.accepted === true) sink.accept()
        if (m.progress === true) sink.progress?.()
        const events = m.events
        // Noted, never acted on: the run's channel stops at its terminal event.
        if (!nodeDone && (m.end === true || events.some(RunEvent.isTerminal))) nodeDone = true
        const taken = events.length === 0 || sink.emit(events)
        if (m.end === true) {
          closed = true
          return sink.end()
        }
        const bytes = msg.data.length
        // Held bytes (the sink answered `false`): granting waits for its `onReady`, registered once.
        if (held > 0) held += bytes
        else if (taken) {
          consumed += bytes
          grant()
        } else {
          held = bytes
          sink.onReady(ready)
        }
      }
      const onError = (e: BusError) => {
        if (!answered) return refused(e.message)
        if (closed) return
        closed = true
        log?.(
          Effect.logWarning("lost the run's event subscription").pipe(
            Effect.annotateLogs({ runId, nodeId: remote.nodeId, error: e.message })
          )
        )
        sink.fail(new NodeDisconnected({ nodeId: remote.nodeId }))
      }
      const cancel = (exit: Exit.Exit<unknown, unknown>) =>
        nodeDone ? Effect.void : bus.publishEncoded(cancelSubject, P.encode.runCancel, {
          v: P.PROTOCOL_VERSION,
          runId,
          reason: Exit.isInterrupted(exit) ? "cancelled by the edge" : "the edge stopped reading the run"
        }).pipe(Effect.ignore)
      // The answer cannot come before this returns: messages are read in a later turn of the event loop.
      const ask = Effect.async<void, NodeUnavailable>((resume) => {
        answer = resume
        const error = bus.unsafePublish(runSubject, start.right, eventsSubject)
        if (error !== undefined) return refused(error.message)
        timer = setTimeout(() => refused(`no reply within ${remote.replyTimeoutMs} ms`), remote.replyTimeoutMs)
        // Interrupted while waiting: the scope's finalizer tells the node.
        return Effect.sync(() => {
          clearTimeout(timer)
          answer = undefined
        })
      })
      return Effect.runtime<never>().pipe(
        Effect.tap((runtime) => {
          const fork = Runtime.runFork(runtime)
          log = (effect) => void fork(effect)
        }),
        Effect.zipRight(bus.subscribeCallback(eventsSubject, onMessage, onError)),
        Effect.mapError((e) => unavailable(e.message)),
        Effect.zipRight(Effect.addFinalizer(cancel)),
        Effect.zipRight(ask)
      )
    })
}

// ---------------------------------------------------------------------------
// Discovery

export interface DiscoverOptions {
  readonly bus: BusConfig
  /** This edge's id on the bus (default: random); a subject token. */
  readonly edgeId?: string
}

interface Known {
  readonly instanceId: string
  readonly lastSeen: number
  readonly announce: P.NodeAnnounce
  readonly scope: Scope.CloseableScope
}

/** Announced model lists compared by value (announcements are decoded anew each time). */
const sameModels = (a: ReadonlyArray<unknown>, b: ReadonlyArray<unknown>): boolean =>
  a.length === b.length && JSON.stringify(a) === JSON.stringify(b)

export const newEdgeId = (): string => `edge_${randomBytes(8).toString("base64url")}`

/**
 * Keeps the NodeRegistry in step with the nodes on the bus: a node is
 * registered at its first announcement, and unregistered (its runs fail with
 * `node disconnected`) when it leaves, restarts, or is silent for
 * `nodeTimeoutMs`. Publishes this edge's heartbeat, which nodes use to stop
 * the runs of an edge that vanished.
 */
export const discover = (
  options: DiscoverOptions
): Effect.Effect<void, never, Scope.Scope | NatsConnection | NodeRegistry> =>
  Effect.gen(function* () {
    const bus = yield* NatsConnection
    const registry = yield* NodeRegistry
    const outer = yield* Effect.scope
    const edgeId = options.edgeId ?? newEdgeId()
    if (!P.isSubjectToken(edgeId)) {
      return yield* Effect.dieMessage(`edge id "${edgeId}" cannot be used in NATS subjects`)
    }
    const S = P.subjects(bus.subjectPrefix)
    const timeoutMs = options.bus.nodeTimeoutMs
    const known = yield* SynchronizedRef.make(new Map<NodeId, Known>())
    const connection = (a: P.NodeAnnounce): NodeConnection => {
      const start = remoteStart(bus, { edgeId, nodeId: a.nodeId, replyTimeoutMs: timeoutMs })
      return {
        id: a.nodeId,
        models: a.models,
        maxConcurrentRuns: a.maxConcurrentRuns,
        start
      }
    }

    const drop = (nodeId: NodeId, why: string) => (m: Map<NodeId, Known>) =>
      Effect.gen(function* () {
        const k = m.get(nodeId)
        if (k === undefined) return m
        yield* Scope.close(k.scope, Exit.void)
        yield* (why === "left" ? Effect.logInfo(`node ${why}`) : Effect.logWarning(`node ${why}`)).pipe(
          Effect.annotateLogs({ nodeId })
        )
        const next = new Map(m)
        next.delete(nodeId)
        return next
      })

    const onAnnounce = (a: P.NodeAnnounce) =>
      SynchronizedRef.updateEffect(known, (m) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const prev = m.get(a.nodeId)
          if (prev !== undefined && prev.instanceId === a.instanceId) {
            // The same node with other model options (it re-read its upstream's chat template): the catalogue follows.
            if (!sameModels(prev.announce.models, a.models)) {
              yield* registry.update(connection(a))
              yield* Effect.logInfo("node models changed").pipe(Effect.annotateLogs({ nodeId: a.nodeId }))
            }
            return new Map(m).set(a.nodeId, { ...prev, lastSeen: now, announce: a })
          }
          // A restarted node lost the runs of its previous life: fail them now.
          const current = prev === undefined ? m : yield* drop(a.nodeId, "restarted")(m)
          if (a.draining) return current
          const scope = yield* Scope.fork(outer, ExecutionStrategy.sequential)
          yield* registry.register(connection(a)).pipe(Scope.extend(scope))
          yield* Effect.logInfo("node joined").pipe(
            Effect.annotateLogs({ nodeId: a.nodeId, models: a.models.map((x) => x.id).join(",") })
          )
          return new Map(current).set(a.nodeId, { instanceId: a.instanceId, lastSeen: now, announce: a, scope })
        })
      )

    const onLeave = (l: P.NodeLeave) =>
      SynchronizedRef.updateEffect(known, (m) =>
        m.get(l.nodeId)?.instanceId === l.instanceId ? drop(l.nodeId, "left")(m) : Effect.succeed(m)
      )

    // A check whose own timer fired late found the event loop busy: announcements may be waiting unread in the
    // subscription, so it judges nobody this round (a busy edge must not drop live nodes and fail their runs).
    const watchInterval = Math.max(10, Math.floor(timeoutMs / 4))
    let lastWatch: number | undefined
    const watchNodes = SynchronizedRef.updateEffect(known, (m) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const late = lastWatch !== undefined && now - lastWatch > watchInterval * 1.5
        lastWatch = now
        if (late) return m
        let next = m
        for (const [nodeId, k] of m) {
          if (now - k.lastSeen > timeoutMs) next = yield* drop(nodeId, "missed its heartbeats")(next)
        }
        return next
      })
    )

    // Nodes of another protocol version never join: said once per version, so a mixed fleet is easy to spot.
    const versionsSeen = new Set<string>()
    const handle = <A>(decode: (bytes: Uint8Array) => P.Decoded<A>, f: (a: A) => Effect.Effect<void>) => (msg: Msg) => {
      const decoded = decode(msg.data)
      if (decoded._tag === "Ok") return f(decoded.value)
      const version = JSON.stringify(decoded._tag === "UnsupportedVersion" ? decoded.version : undefined) ?? "none"
      if (decoded._tag === "UnsupportedVersion" && !versionsSeen.has(version)) {
        versionsSeen.add(version)
        return Effect.logWarning(
          `ignoring nodes of protocol version ${version}: this edge speaks version ${P.PROTOCOL_VERSION}`
        )
      }
      return Effect.logDebug("ignored a bus message", P.describeRejection(decoded))
    }

    const announcements = yield* bus.subscribe(S.announce).pipe(Effect.orDie)
    const leaves = yield* bus.subscribe(S.leave).pipe(Effect.orDie)
    yield* Stream.merge(
      announcements.pipe(Stream.mapEffect(handle(P.decode.announce, onAnnounce))),
      leaves.pipe(Stream.mapEffect(handle(P.decode.leave, onLeave)))
    ).pipe(
      Stream.runDrain,
      Effect.catchAll((e) =>
        Effect.logError("node discovery subscription ended").pipe(Effect.annotateLogs({ error: e.message }))
      ),
      Effect.forkScoped
    )

    const beat: P.EdgeHeartbeat = { v: P.PROTOCOL_VERSION, edgeId }
    const heartbeat = bus.publishEncoded(S.edgeHeartbeat, P.encode.edgeHeartbeat, beat).pipe(
      Effect.catchAll((e) => Effect.logDebug("cannot publish the edge heartbeat", e.message))
    )
    const every = (divisor: number) => Schedule.spaced(Duration.millis(Math.max(10, Math.floor(timeoutMs / divisor))))
    yield* heartbeat.pipe(Effect.repeat(every(3)), Effect.forkScoped)
    yield* watchNodes.pipe(Effect.repeat(Schedule.spaced(Duration.millis(watchInterval))), Effect.forkScoped)
    yield* Effect.logInfo("edge discovering nodes over NATS").pipe(Effect.annotateLogs({ edgeId }))
  })

/** The edge's side of the bus: connection, discovery and heartbeat, for as long as the layer lives. */
export const layer = (
  options: DiscoverOptions
): Layer.Layer<never, BusConnectFailed, NodeRegistry> =>
  Layer.scopedDiscard(discover(options)).pipe(
    Layer.provide(
      NatsBus.layer(options.bus, { name: options.edgeId === undefined ? "iop-edge" : `iop-edge-${options.edgeId}` })
    )
  )

/** `layer` when the config has a `bus`, else nothing: no remote nodes, no announced models. */
export const layerFromConfig = (bus: BusConfig | undefined): Layer.Layer<never, BusConnectFailed, NodeRegistry> =>
  bus === undefined ? Layer.empty : layer({ bus })
