import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Fiber from "effect/Fiber"
import * as Runtime from "effect/Runtime"
import { randomBytes } from "node:crypto"
import { NodeDisconnected, RunCancelled, type RunError, type SubmitError } from "../protocol/errors.js"
import { boundsFor, deadlinesOf, dueAt, expiry, type IdleBounds, type RunBounds } from "./deadlines.js"
import { NodeAttempts } from "./NodeAttempts.js"
import { type NodeLease, NodeRegistry } from "./NodeRegistry.js"
import { RunChannel } from "./RunChannel.js"
import { handleOf, type RunHandle } from "./RunHandle.js"
import { RunId } from "../protocol/RunEvent.js"
import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"
import * as Watchdog from "./Watchdog.js"

export type { RunDispatch, RunHandle } from "./RunHandle.js"
export type { ReadyWhen, RunRead, TokenTiming } from "./RunChannel.js"

export declare namespace RunService {
  export interface Service {
    /** Picks a node and starts the run on it; fails before anything ran (no node, all busy, every node refused). */
    readonly submit: (request: SubmitRunRequest) => Effect.Effect<RunHandle, SubmitError, Scope.Scope>
    /**
     * Ends every active run with `RunCancelled` and cancels it on its node, all
     * at once (`terminate` each); never waits for a reader. Bounded by `timeout`.
     */
    readonly cancelAll: (reason: string, timeout?: Duration.DurationInput) => Effect.Effect<void>
    readonly activeRuns: Effect.Effect<number>
  }
}

export class RunService extends Context.Tag("@iop/edge/RunService")<RunService, RunService.Service>() {}

export interface RunServiceOptions {
  /**
   * `runs.idleTimeoutMs`: the longest a run may make no progress: no event from the upstream while the reader
   * waits for one (`RunIdle`), or nothing taken by the reader while it has output it cannot write (`WriteStalled`).
   */
  readonly idleTimeoutMs: number
  /**
   * `runs.wholeAnswerTimeoutMs` (default 600000, raised to `idleTimeoutMs` when below it): the longest a run may
   * wait on a whole answer (its producer's `awaitWhole`: an upstream asked for JSON sends nothing until its end),
   * in place of the idle bound, which cannot see progress there. After it the run ends with `RunIdle`.
   */
  readonly wholeAnswerTimeoutMs?: number
  /**
   * `runs.firstTokenTimeoutMs` (default: none): the longest a streamed run may go without its first content,
   * reasoning or tool-call output, from its submission (a long prefill); then it ends with `RunDeadline`. A model's
   * own `runs.firstTokenTimeoutMs` (its node announces it) replaces it.
   */
  readonly firstTokenTimeoutMs?: number
  /**
   * `runs.maxRunMs` (default: none): the longest a run may take from its submission to its terminal event; then it
   * ends with `RunDeadline`. A model's own `runs.maxRunMs` replaces it.
   */
  readonly maxRunMs?: number
  /** Names each run (default: `newRunId`, unique across edges); a test kit names them in order. */
  readonly runIds?: () => RunId
}

export const DEFAULT_WHOLE_ANSWER_TIMEOUT_MS = 600_000

// A random prefix per process and a counter: unique across edges, and cheaper than random bytes per run.
const RUN_PREFIX = randomBytes(9).toString("base64url")
let runCounter = 0

export const newRunId = (): RunId => RunId.make(`run_${RUN_PREFIX}${(runCounter++).toString(36).padStart(6, "0")}`)

interface Active {
  readonly channel: RunChannel
  /** Set once the run's scope is known (after dispatch). */
  scope: Scope.CloseableScope | undefined
  /** The closing of its scope once the run was ended early. */
  closing: Fiber.RuntimeFiber<void> | undefined
  terminated: boolean
}

export const make = (
  options: RunServiceOptions
): Effect.Effect<RunService.Service, never, NodeRegistry | Scope.Scope> =>
  Effect.gen(function* () {
    const registry = yield* NodeRegistry
    const clock = yield* Effect.clock
    const now = () => clock.unsafeCurrentTimeMillis()
    // Woken early: a run's first-token or run bound may be nearer than the idle one.
    const watchdog = yield* Watchdog.make(options.idleTimeoutMs, { wakeEarly: true })
    const idleMs = options.idleTimeoutMs
    const idle: IdleBounds = { idleMs, wholeMs: Math.max(options.wholeAnswerTimeoutMs ?? DEFAULT_WHOLE_ANSWER_TIMEOUT_MS, idleMs) }
    const edgeBounds: RunBounds = { firstTokenMs: options.firstTokenTimeoutMs, maxRunMs: options.maxRunMs }
    const nextRunId = options.runIds ?? newRunId
    const active = new Set<Active>()

    const runFork = Runtime.runFork(yield* Effect.runtime<never>())

    /**
     * The one way to end a run early (idle, write stall, first-token and run bounds, node loss, a lost
     * subscription, shutdown): its channel
     * fails with `error` (unless its terminal came first), its reader is told, and its scope closes — upstream
     * aborted, slot and watchers released — without waiting for the reader.
     */
    const terminate = (entry: Active, error: RunError): void => {
      if (entry.terminated) return
      entry.terminated = true
      entry.channel.halt(error)
      if (entry.scope !== undefined) entry.closing = runFork(Scope.close(entry.scope, Exit.void))
    }

    // A plain function, not `Effect.fn` with a span: nothing exports spans from the edge, and the span (and
    // `annotateCurrentSpan`, which fails and builds an error when there is none) cost per run for nobody.
    const submit = (request: SubmitRunRequest) => Effect.gen(function* () {
      const startedAt = now()
      const runScope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
      const runId = nextRunId()
      // The channel's `fail` (what a transport calls) is `terminate`, as for every other early end.
      const channel: RunChannel = new RunChannel(now, (error) => terminate(entry, error))
      const entry: Active = { channel, scope: undefined, closing: undefined, terminated: false }
      // Node loss ends the run, on whichever node has it (after a failover too).
      const watch = (lease: NodeLease) => {
        const nodeId = lease.node.id
        lease.onGone(() => terminate(entry, new NodeDisconnected({ nodeId })))
      }
      const attempts = new NodeAttempts({
        registry,
        runId,
        channel,
        runScope,
        fork: (effect) => void runFork(Effect.forkIn(effect, runScope)),
        onNode: watch
      }, request)
      const first: NodeLease = yield* attempts.start.pipe(Effect.onError(() => Scope.close(runScope, Exit.void)))
      entry.scope = runScope
      watch(first)
      active.add(entry)
      // The bounds of the node that takes it first: it announced the model's own, if any.
      const own = deadlinesOf(
        startedAt,
        boundsFor(edgeBounds, first.node.models.find((m) => m.id === request.model)?.runs),
        request.wholeAnswer === true
      )
      const unwatch = watchdog.watch({
        get dueAt() {
          return dueAt(channel, idle, own)
        },
        onIdle: () => terminate(entry, expiry(channel, idle, own))
      })
      yield* Scope.addFinalizer(runScope, Effect.sync(() => {
        active.delete(entry)
        unwatch()
        attempts.settle()
      }))
      // Ended early while it was being dispatched: its scope closes now that it is known.
      if (entry.terminated) entry.closing = runFork(Scope.close(runScope, Exit.void))
      const lease = () => attempts.lease ?? first
      return handleOf({
        runId,
        model: request.model,
        get nodeId() {
          return lease().node.id
        },
        get route() {
          return lease().route
        },
        get nodeAttempt() {
          return attempts.attempt
        }
      }, channel)
    })

    const cancelAll = (reason: string, timeout: Duration.DurationInput = Duration.seconds(1)) =>
      Effect.suspend(() => {
        const runs = Array.from(active)
        for (const run of runs) terminate(run, new RunCancelled({ reason }))
        return Fiber.awaitAll(runs.flatMap((run) => (run.closing === undefined ? [] : [run.closing])))
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
