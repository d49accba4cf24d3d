import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Scope from "effect/Scope"
import type { Provider } from "../../../src/providers/Provider.js"
import type { RunError } from "../../../src/protocol/errors.js"
import type * as RunEvent from "../../../src/protocol/RunEvent.js"
import type { RunSink } from "../../../src/protocol/RunSink.js"
import type { SubmitRunRequest } from "../../../src/protocol/SubmitRunRequest.js"

/** A sink that records what a provider wrote: each `emit` as one batch, `end`, `fail` and `onReady` callbacks. */
export interface TestSink extends RunSink {
  readonly batches: Array<ReadonlyArray<RunEvent.RunEvent>>
  /** The `resume` callbacks given to `onReady`, in order. */
  readonly resumes: Array<() => void>
  readonly failures: Array<RunError>
  /** Each `accept` call, as the number of batches emitted before it. */
  readonly accepts: Array<number>
  /** `progress` calls (output with no event yet: a native tool call), each as the number of batches before it. */
  readonly progressed: Array<number>
  /** Batches emitted after `end` (a provider should emit none). */
  readonly afterEnd: Array<ReadonlyArray<RunEvent.RunEvent>>
  /** Completes at the first `end` or `fail`. */
  readonly ended: Deferred.Deferred<void>
  readonly events: () => ReadonlyArray<RunEvent.RunEvent>
}

export const makeTestSink = (options: {
  /** What `emit` answers for the n-th batch (0-based); `true` (keep going) by default. */
  readonly ready?: (batch: ReadonlyArray<RunEvent.RunEvent>, index: number) => boolean
  /** Called at each `emit`, after the batch was recorded. */
  readonly onEmit?: (batch: ReadonlyArray<RunEvent.RunEvent>, index: number) => void
} = {}): Effect.Effect<TestSink> =>
  Effect.map(Deferred.make<void>(), (ended) => {
    const batches: Array<ReadonlyArray<RunEvent.RunEvent>> = []
    const afterEnd: Array<ReadonlyArray<RunEvent.RunEvent>> = []
    const resumes: Array<() => void> = []
    const failures: Array<RunError> = []
    const accepts: Array<number> = []
    const progressed: Array<number> = []
    let open = true
    const close = () => {
      open = false
      Deferred.unsafeDone(ended, Exit.void)
    }
    return {
      batches,
      resumes,
      failures,
      afterEnd,
      accepts,
      progressed,
      ended,
      events: () => batches.flat(),
      emit: (events) => {
        const batch = [...events]
        if (!open) {
          afterEnd.push(batch)
          return true
        }
        const index = batches.length
        batches.push(batch)
        options.onEmit?.(batch, index)
        return options.ready?.(batch, index) ?? true
      },
      accept: () => {
        accepts.push(batches.length)
      },
      progress: () => {
        progressed.push(batches.length)
      },
      end: close,
      fail: (error) => {
        failures.push(error)
        close()
      },
      onReady: (resume) => {
        resumes.push(resume)
      }
    }
  })

/** Starts the run in the current scope and collects every event the provider writes until it ends the sink. */
export const collectEvents = (
  provider: Provider,
  request: SubmitRunRequest
): Effect.Effect<ReadonlyArray<RunEvent.RunEvent>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const sink = yield* makeTestSink()
    yield* provider.start(request, sink)
    yield* Deferred.await(sink.ended)
    return sink.events()
  })
