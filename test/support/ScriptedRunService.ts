import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
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
  /** Runs whose event stream was stopped before its end (cancelled on the node). */
  readonly cancelled: Array<string>
}

/** A RunService that plays one script per submission, in order, and records what the edge did with each run. */
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
      const events = script.events.pipe(
        Stream.ensuringWith((exit) => Effect.sync(() => (Exit.isSuccess(exit) ? 0 : cancelled.push(runId))))
      )
      return { dispatch: { runId, nodeId: NodeId.make("scripted"), model: request.model }, events }
    })
  return { layer: Layer.succeed(RunService, { submit }), submitted, released, cancelled }
}
