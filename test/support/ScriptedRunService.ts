import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { RunError, SubmitError } from "../../src/run/errors.js"
import { NodeId, type RunEvent, RunId } from "../../src/run/RunEvent.js"
import { RunService } from "../../src/run/RunService.js"
import type { SubmitRunRequest } from "../../src/run/SubmitRunRequest.js"

/** What a scripted run does: its events, or a submission error. */
export type Script =
  | { readonly _tag: "Events"; readonly events: Stream.Stream<RunEvent, RunError> }
  | { readonly _tag: "Refuse"; readonly error: SubmitError }

export const events = (...items: ReadonlyArray<RunEvent>): Script => ({ _tag: "Events", events: Stream.fromIterable(items) })
export const eventStream = (events: Stream.Stream<RunEvent, RunError>): Script => ({ _tag: "Events", events })
export const refuse = (error: SubmitError): Script => ({ _tag: "Refuse", error })

export interface ScriptedRuns {
  readonly layer: Layer.Layer<RunService>
  /** Requests submitted, in order (retries included). */
  readonly submitted: Array<SubmitRunRequest>
  /** Runs whose scope closed (released or cancelled), by run id. */
  readonly released: Array<string>
  /** Runs whose script was stopped before its end (cancelled on the node). */
  readonly cancelled: Array<string>
}

/**
 * A RunService that plays one script per submission, in order, into the
 * run's mailbox (each chunk of the script one batch), and records what the
 * edge did with each run. No idle watchdog: tests of timeouts use the real
 * RunService with a scripted node.
 */
export const scriptedRuns = (scripts: ReadonlyArray<Script>): ScriptedRuns => {
  const submitted: Array<SubmitRunRequest> = []
  const released: Array<string> = []
  const cancelled: Array<string> = []
  const submit = (request: SubmitRunRequest) =>
    Effect.gen(function* () {
      const n = submitted.length
      submitted.push(request)
      const script = scripts[n]
      if (script === undefined) return yield* Effect.dieMessage(`no script for submission ${n + 1}`)
      if (script._tag === "Refuse") return yield* Effect.fail(script.error)
      const runId = RunId.make(`run_scripted${n + 1}`)
      yield* Effect.addFinalizer(() => Effect.sync(() => released.push(runId)))
      const mailbox = yield* Mailbox.make<RunEvent, RunError>()
      yield* script.events.pipe(
        Stream.runForEachChunk((chunk) => Effect.sync(() => mailbox.unsafeOfferAll(chunk))),
        Effect.onExit((exit) => Effect.sync(() => mailbox.unsafeDone(exit))),
        Effect.onInterrupt(() => Effect.sync(() => cancelled.push(runId))),
        Effect.forkScoped
      )
      const take = mailbox.takeAll
      const events = Stream.repeatEffectChunkOption(
        take.pipe(
          Effect.mapError(Option.some),
          Effect.flatMap(([chunk, done]) => (done && Chunk.isEmpty(chunk) ? Effect.fail(Option.none()) : Effect.succeed(chunk)))
        )
      )
      return { dispatch: { runId, nodeId: NodeId.make("scripted"), model: request.model }, take, events }
    })
  return {
    layer: Layer.succeed(RunService, {
      submit,
      cancelAll: () => Effect.void,
      activeRuns: Effect.succeed(0)
    }),
    submitted,
    released,
    cancelled
  }
}
