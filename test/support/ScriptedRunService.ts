import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Exit from "effect/Exit"
import * as Stream from "effect/Stream"
import type { RunError, SubmitError } from "../../src/run/errors.js"
import { NodeId, type RunEvent, RunId } from "../../src/run/RunEvent.js"
import { RunChannel } from "../../src/run/RunChannel.js"
import { handleOf, RunService } from "../../src/run/RunService.js"
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
      const channel = new RunChannel(() => Date.now())
      // A script that dies stands for a bug below the session: the reader's next read throws it.
      let defect: { readonly error: unknown } | undefined
      yield* script.events.pipe(
        Stream.runForEachChunk((chunk) => Effect.sync(() => channel.emit(Chunk.toReadonlyArray(chunk)))),
        Effect.onExit((exit) =>
          Effect.sync(() => {
            if (Exit.isSuccess(exit)) channel.end()
            else if (exit.cause._tag === "Fail") channel.fail(exit.cause.error)
            else if (exit.cause._tag === "Die") {
              defect = { error: exit.cause.defect }
              channel.end()
            }
          })
        ),
        Effect.onInterrupt(() => Effect.sync(() => cancelled.push(runId))),
        Effect.forkScoped
      )
      const handle = handleOf({ runId, nodeId: NodeId.make("scripted"), model: request.model }, channel)
      const read = () => {
        if (defect !== undefined) throw defect.error
        return channel.read()
      }
      return { ...handle, read, take: Effect.flatMap(handle.take, (r) => (defect === undefined ? Effect.succeed(r) : Effect.die(defect.error))) }
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
