import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { RunError, SubmitError } from "../protocol/errors.js"
import { NodeId, type RunEvent, RunId } from "../protocol/RunEvent.js"
import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"
import { make as makeRegistry, type NodeConnection, type NodeLease, NodeRegistry } from "../run/NodeRegistry.js"
import * as RunServiceM from "../run/RunService.js"
import { RunService } from "../run/RunService.js"

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
  /** Runs whose script was stopped before its end (the caller left, a timeout, or `cancelAll`), by run id. */
  readonly cancelled: ReadonlyArray<RunId>
}

export interface ScriptedRunsOptions {
  /** `runs.idleTimeoutMs` of the run service the scripts play in (default 60 s, the config's). */
  readonly idleTimeoutMs?: number
}

const SCRIPTED = NodeId.make("scripted")

/**
 * The real `RunService` (its channel, watchdog, cancellation and `cancelAll`) over one node that plays scripts:
 * the n-th submission plays the n-th script (a submission with no script left is a defect). For testing code above
 * the run plane (the chat plane, a route of your own) against exact event sequences. The records are plain
 * arrays, readable at any time. Runs are `run_scripted1`, `run_scripted2`, ... on node `scripted`; the idle
 * watchdog runs on the test's `Clock` (`TestClock` under `it.effect`).
 */
export const make = (scripts: Iterable<Script>, options: ScriptedRunsOptions = {}): ScriptedRuns => {
  const plan = Array.from(scripts)
  const submitted: Array<SubmitRunRequest> = []
  const released: Array<RunId> = []
  const cancelled: Array<RunId> = []
  // Which script a submitted request plays (the run service hands the node the request it was given).
  const scriptOf = new WeakMap<SubmitRunRequest, Stream.Stream<RunEvent, RunError>>()

  const node: NodeConnection = {
    id: SCRIPTED,
    models: [],
    maxConcurrentRuns: Number.POSITIVE_INFINITY,
    start: (runId, request, sink) =>
      Effect.gen(function* () {
        const script = scriptOf.get(request) ?? Stream.empty
        yield* Effect.addFinalizer(() => Effect.sync(() => void released.push(runId)))
        yield* script.pipe(
          Stream.runForEachChunk((chunk) =>
            sink.emit(Chunk.toReadonlyArray(chunk))
              ? Effect.void
              : Effect.async<void>((resume) => sink.onReady(() => resume(Effect.void)))
          ),
          Effect.onExit((exit) =>
            Effect.sync(() => {
              if (Exit.isSuccess(exit)) return sink.end()
              const error = Cause.failureOption(exit.cause)
              // A script that dies ends the run as a broken stream, as a provider that dies would.
              if (Option.isSome(error)) sink.fail(error.value)
              else if (!Cause.isInterruptedOnly(exit.cause)) sink.end()
            })
          ),
          Effect.onInterrupt(() => Effect.sync(() => void cancelled.push(runId))),
          Effect.forkScoped
        )
      })
  }

  // The one node serves whatever model a script is submitted for; the registry's other verbs answer as an empty one.
  const registry = Effect.map(makeRegistry, (empty): NodeRegistry.Service => ({
    ...empty,
    acquire: () =>
      Effect.succeed<NodeLease>({
        node,
        onGone: () => undefined,
        route: { reason: "only", matchedBlocks: 0, alternatives: 0 },
        report: () => undefined
      })
  }))

  const layer = Layer.scoped(
    RunService,
    Effect.gen(function* () {
      const real = yield* RunServiceM.make({
        idleTimeoutMs: options.idleTimeoutMs ?? 60_000,
        // Named after the submission (a refused one takes its number too).
        runIds: () => RunId.make(`run_scripted${submitted.length}`)
      }).pipe(Effect.provideServiceEffect(NodeRegistry, registry))
      const submit = (request: SubmitRunRequest) =>
        Effect.suspend(() => {
          const n = submitted.length
          submitted.push(request)
          const script = plan[n]
          if (script === undefined) return Effect.dieMessage(`no script for submission ${n + 1}`)
          if (script._tag === "Refuse") return Effect.fail(script.error)
          scriptOf.set(request, script.events)
          return real.submit(request)
        })
      return { ...real, submit } satisfies RunService.Service
    })
  )

  return { layer, submitted, released, cancelled }
}
