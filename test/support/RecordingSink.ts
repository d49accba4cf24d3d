import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type { RunError } from "../../src/run/errors.js"
import type { RunEvent } from "../../src/run/RunEvent.js"
import type { RunSink } from "../../src/run/RunSink.js"

/** A sink that records what a producer wrote, batch by batch; `ended` completes on `end` or `fail`. */
export const recordingSink = Effect.gen(function* () {
  const batches: Array<ReadonlyArray<RunEvent>> = []
  const ended = yield* Deferred.make<RunError | undefined>()
  const sink: RunSink = {
    emit: (events) => {
      batches.push(events)
      return true
    },
    end: () => Deferred.unsafeDone(ended, Effect.succeed(undefined)),
    fail: (error) => Deferred.unsafeDone(ended, Effect.succeed(error)),
    onReady: () => undefined
  }
  return { sink, batches, events: () => batches.flat(), ended: Deferred.await(ended) }
})
