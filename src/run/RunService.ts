import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import { randomBytes } from "node:crypto"
import { NodeDisconnected, type NodeUnavailable, RunCancelled, type RunError, RunIdle, type SubmitError } from "./errors.js"
import { type NodeLease, NodeRegistry } from "./NodeRegistry.js"
import { RunChannel, type RunRead, type TokenTiming } from "./RunChannel.js"
import { type NodeId, type RunEvent, RunId } from "./RunEvent.js"
import type { SubmitRunRequest } from "./SubmitRunRequest.js"
import * as Watchdog from "./Watchdog.js"

export interface RunDispatch {
  readonly runId: RunId
  /** The node that took the run (after any failover). */
  readonly nodeId: NodeId
  readonly model: string
}

/**
 * A started run. Its events arrive in one mailbox, written by the node's
 * transport, node loss, the idle watchdog and cancellation. Closing the scope
 * `submit` ran in cancels the run on its node (one finalizer releases the
 * slot, the watchers and the upstream request).
 */
export interface RunHandle {
  readonly dispatch: RunDispatch
  /**
   * Everything that arrived since the last read, and whether the events
   * ended; or the outcome that ended the run other than by its own events
   * (node lost, idle timeout, cancelled, broken transport). `undefined` while
   * nothing arrived: `onReadable` calls back once something did.
   */
  readonly read: () => RunRead | undefined
  readonly onReadable: (wake: () => void) => void
  /** Calls `wake` once the run ended or its producer had to pause: for a reader that collects the whole run. */
  readonly onSettled: (wake: () => void) => void
  /** When the run's text arrived (stamped on arrival, however late it is read). */
  readonly timing: TokenTiming
  /** `read` as an Effect that waits while nothing arrived. */
  readonly take: Effect.Effect<RunRead>
  /** The same events as a Stream, for callers that want one. */
  readonly events: Stream.Stream<RunEvent, RunError>
}

/** A started run's handle over its channel. */
export const handleOf = (dispatch: RunDispatch, channel: RunChannel): RunHandle => ({
  dispatch,
  read: channel.read,
  onReadable: channel.onReadable,
  onSettled: channel.onSettled,
  timing: channel.timing,
  take: channel.take,
  events: channel.events
})

export declare namespace RunService {
  export interface Service {
    /** Picks a node and starts the run on it; fails before anything ran (no node, all busy, every node refused). */
    readonly submit: (request: SubmitRunRequest) => Effect.Effect<RunHandle, SubmitError, Scope.Scope>
    /**
     * Ends every active run with `RunCancelled` and cancels it on its node, all
     * at once; never waits for a reader. Bounded by `timeout`.
     */
    readonly cancelAll: (reason: string, timeout?: Duration.DurationInput) => Effect.Effect<void>
    readonly activeRuns: Effect.Effect<number>
  }
}

export class RunService extends Context.Tag("@iop/edge/RunService")<RunService, RunService.Service>() {}

export interface RunServiceOptions {
  /** `runs.idleTimeoutMs`: the longest wait for a run's next event. */
  readonly idleTimeoutMs: number
}

/** Nodes a run is offered to before a refusal reaches the caller. */
const MAX_NODE_ATTEMPTS = 3

// A random prefix per process and a counter: unique across edges, and cheaper than random bytes per run.
const RUN_PREFIX = randomBytes(9).toString("base64url")
let runCounter = 0

export const newRunId = (): RunId => RunId.make(`run_${RUN_PREFIX}${(runCounter++).toString(36).padStart(6, "0")}`)

interface Active {
  readonly channel: RunChannel
  readonly scope: Scope.CloseableScope
}

export const make = (
  options: RunServiceOptions
): Effect.Effect<RunService.Service, never, NodeRegistry | Scope.Scope> =>
  Effect.gen(function* () {
    const registry = yield* NodeRegistry
    const clock = yield* Effect.clock
    const now = () => clock.unsafeCurrentTimeMillis()
    const watchdog = yield* Watchdog.make(options.idleTimeoutMs)
    const active = new Set<Active>()

    /** Takes a slot and starts the run there; a node that refuses gives its slot back at once and the next is tried. */
    const dispatch = (runScope: Scope.Scope, runId: RunId, request: SubmitRunRequest, channel: RunChannel) =>
      Effect.gen(function* () {
        const excluded = new Set<NodeId>()
        let sent = request
        let refused: NodeUnavailable | undefined
        for (;;) {
          const leaseScope = yield* Scope.fork(runScope, ExecutionStrategy.sequential)
          const started = yield* registry.acquire(request.model, excluded).pipe(
            Effect.tap((lease) => lease.node.start(runId, sent, channel)),
            Scope.extend(leaseScope),
            Effect.either
          )
          if (started._tag === "Right") return started.right
          yield* Scope.close(leaseScope, Exit.void)
          const error: SubmitError = started.left
          // After a refusal, "no other node" is still that refusal: every node that could run it said no.
          if (error._tag !== "NodeUnavailable") return yield* Effect.fail(refused ?? error)
          if (excluded.size + 1 >= MAX_NODE_ATTEMPTS) return yield* Effect.fail(error)
          refused = error
          excluded.add(error.nodeId)
          yield* Effect.logDebug("node unavailable; trying another").pipe(
            Effect.annotateLogs({ runId, nodeId: error.nodeId, reason: error.reason })
          )
          // The next node is told which attempt this is and which node refused it.
          sent = {
            ...sent,
            metadata: {
              ...sent.metadata,
              node_attempt: String(excluded.size + 1),
              failed_node_id: error.nodeId,
              node_failure: error.reason
            }
          }
        }
      })

    // A plain function, not `Effect.fn` with a span: nothing exports spans from the edge, and the span (and
    // `annotateCurrentSpan`, which fails and builds an error when there is none) cost per run for nobody.
    const submit = (request: SubmitRunRequest) => Effect.gen(function* () {
      const runScope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
      const runId = newRunId()
      const channel = new RunChannel(now)
      const lease: NodeLease = yield* dispatch(runScope, runId, request, channel).pipe(
        Effect.onError(() => Scope.close(runScope, Exit.void))
      )
      const nodeId = lease.node.id
      lease.onGone(() => channel.fail(new NodeDisconnected({ nodeId })))
      const entry: Active = { channel, scope: runScope }
      active.add(entry)
      const unwatch = watchdog.watch({
        get lastEventAt() {
          return channel.lastEventAt
        },
        onIdle: () => channel.fail(new RunIdle({ idleMs: options.idleTimeoutMs }))
      })
      yield* Scope.addFinalizer(runScope, Effect.sync(() => {
        active.delete(entry)
        unwatch()
      }))
      return handleOf({ runId, nodeId, model: request.model }, channel)
    })

    const cancelAll = (reason: string, timeout: Duration.DurationInput = Duration.seconds(1)) =>
      Effect.suspend(() => {
        const runs = Array.from(active)
        for (const run of runs) run.channel.fail(new RunCancelled({ reason }))
        return Effect.forEach(runs, (run) => Scope.close(run.scope, Exit.void), {
          concurrency: "unbounded",
          discard: true
        })
      }).pipe(
        // Cancel paths run in finalizers (uninterruptible): made interruptible so that the bound holds.
        Effect.interruptible,
        Effect.timeout(timeout),
        Effect.ignore
      )

    return { submit, cancelAll, activeRuns: Effect.sync(() => active.size) }
  })

export const layer = (options: RunServiceOptions): Layer.Layer<RunService, never, NodeRegistry> =>
  Layer.scoped(RunService, make(options))
