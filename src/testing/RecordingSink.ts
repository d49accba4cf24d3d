import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type { RunError } from "../protocol/errors.js"
import type { RunEvent } from "../protocol/RunEvent.js"
import type { RunSink } from "../protocol/RunSink.js"

/**
 * A `RunSink` that records what a producer wrote, for testing a provider on its own:
 *
 * ```ts
 * const rec = yield* RecordingSink.make
 * yield* myProvider.start(runRequest("mine"), rec.sink)   // in a scope: closing it cancels the run
 * yield* rec.ended
 * expect(yield* rec.events).toEqual([...])
 * ```
 *
 * It never falls behind (`emit` always returns `true`).
 */
export interface RecordingSink {
  readonly sink: RunSink
  /** What was written, batch by batch (one `emit` each). */
  readonly batches: Effect.Effect<ReadonlyArray<ReadonlyArray<RunEvent>>>
  /** What was written, in order. */
  readonly events: Effect.Effect<ReadonlyArray<RunEvent>>
  /** Completes when the producer ended the run: `undefined` on `end`, the error on `fail`. */
  readonly ended: Effect.Effect<RunError | undefined>
  /** Whether the producer said the upstream accepted the run (`accept`). */
  readonly accepted: Effect.Effect<boolean>
}

export const make: Effect.Effect<RecordingSink> = Effect.gen(function* () {
  const batches: Array<ReadonlyArray<RunEvent>> = []
  const ended = yield* Deferred.make<RunError | undefined>()
  let accepted = false
  const sink: RunSink = {
    emit: (events) => {
      batches.push(events)
      return true
    },
    accept: () => {
      accepted = true
    },
    end: () => Deferred.unsafeDone(ended, Effect.succeed(undefined)),
    fail: (error) => Deferred.unsafeDone(ended, Effect.succeed(error)),
    onReady: () => undefined
  }
  return {
    sink,
    batches: Effect.sync(() => batches.slice()),
    events: Effect.sync(() => batches.flat()),
    ended: Deferred.await(ended),
    accepted: Effect.sync(() => accepted)
  }
})
