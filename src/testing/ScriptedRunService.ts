import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { RunCancelled, type RunError, type SubmitError } from "../protocol/errors.js"
import { RunChannel } from "../run/RunChannel.js"
import { NodeId, type RunEvent, RunId } from "../protocol/RunEvent.js"
import { handleOf, RunService } from "../run/RunService.js"
import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"

/** What one submission does: play its events into the run, or refuse before anything ran. */
export type Script =
  | { readonly _tag: "Events"; readonly events: Stream.Stream<RunEvent, RunError> }
  | { readonly _tag: "Refuse"; readonly error: SubmitError }

/** The run's events, as one batch; a run without a terminal event among them ends as a broken stream. */
export const events = (...items: ReadonlyArray<RunEvent>): Script => ({ _tag: "Events", events: Stream.fromIterable(items) })

/**
 * The run's events from a Stream (each chunk one batch; `Stream.never` keeps it silent; sleeps go by the
 * `Clock`, so `TestClock` drives them). A failure ends the run with that run-plane error (node disconnected, ...).
 */
export const eventStream = (events: Stream.Stream<RunEvent, RunError>): Script => ({ _tag: "Events", events })

/** The submission fails with `error` (no node, all at capacity, refused). */
export const refuse = (error: SubmitError): Script => ({ _tag: "Refuse", error })

export interface ScriptedRuns {
  readonly layer: Layer.Layer<RunService>
  /** Requests submitted, in order (retries included). */
  readonly submitted: ReadonlyArray<SubmitRunRequest>
  /** Runs whose scope closed (ended and released, or cancelled), by run id. */
  readonly released: ReadonlyArray<RunId>
  /** Runs whose script was stopped before its end (the caller left, or `cancelAll`), by run id. */
  readonly cancelled: ReadonlyArray<RunId>
}

interface Active {
  readonly channel: RunChannel
  readonly scope: Scope.CloseableScope
}

/**
 * A `RunService` without any node: the n-th submission plays the n-th script (a submission with no script
 * left is a defect). For testing code above the run plane (the chat plane, a route of your own) against
 * exact event sequences. The records are plain arrays, readable at any time. There is no idle watchdog: to
 * test timeouts, use the real run plane (`TestEdge.layer`) with a `ScriptedProvider`. Runs are
 * `run_scripted1`, `run_scripted2`, ... on node `scripted`.
 */
export const make = (scripts: Iterable<Script>): ScriptedRuns => {
  const plan = Array.from(scripts)
  const submitted: Array<SubmitRunRequest> = []
  const released: Array<RunId> = []
  const cancelled: Array<RunId> = []
  const active = new Set<Active>()

  const submit = (request: SubmitRunRequest) =>
    Effect.gen(function* () {
      const n = submitted.length
      submitted.push(request)
      const script = plan[n]
      if (script === undefined) return yield* Effect.dieMessage(`no script for submission ${n + 1}`)
      if (script._tag === "Refuse") return yield* Effect.fail(script.error)
      const runId = RunId.make(`run_scripted${n + 1}`)
      const scope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
      const clock = yield* Effect.clock
      const channel = new RunChannel(() => clock.unsafeCurrentTimeMillis())
      const entry: Active = { channel, scope }
      active.add(entry)
      yield* Scope.addFinalizer(scope, Effect.sync(() => {
        active.delete(entry)
        released.push(runId)
      }))
      yield* script.events.pipe(
        Stream.runForEachChunk((chunk) => Effect.sync(() => channel.emit(Chunk.toReadonlyArray(chunk)))),
        Effect.onExit((exit) =>
          Effect.sync(() => {
            if (Exit.isSuccess(exit)) return channel.end()
            const error = Cause.failureOption(exit.cause)
            // A script that dies ends the run as a broken stream, as a provider that dies would.
            if (Option.isSome(error)) channel.fail(error.value)
            else if (!Cause.isInterruptedOnly(exit.cause)) channel.end()
          })
        ),
        Effect.onInterrupt(() => Effect.sync(() => cancelled.push(runId))),
        Effect.forkIn(scope)
      )
      return handleOf({ runId, nodeId: NodeId.make("scripted"), model: request.model }, channel)
    })

  const cancelAll = (reason: string) =>
    Effect.suspend(() => {
      const runs = Array.from(active)
      for (const run of runs) run.channel.fail(new RunCancelled({ reason }))
      return Effect.forEach(runs, (run) => Scope.close(run.scope, Exit.void), { discard: true })
    })

  return {
    layer: Layer.succeed(RunService, { submit, cancelAll, activeRuns: Effect.sync(() => active.size) }),
    submitted,
    released,
    cancelled
  }
}
