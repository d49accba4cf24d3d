import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as LocalNode from "../run/LocalNode.js"
import type { Provider } from "../providers/Provider.js"
import type { NodeRegistry } from "../run/NodeRegistry.js"
import * as RunEvent from "../protocol/RunEvent.js"
import type { RunSink } from "../protocol/RunSink.js"
import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"
import * as Step from "./Step.js"

/**
 * Where a scripted run is: `running` until the provider ends it (a terminal event, `end`, the script's end),
 * `ended` after, `cancelled` when the edge closed the run's scope while it was still running.
 */
export type RunState = "running" | "ended" | "cancelled"

/**
 * One run the edge started on a scripted provider, driven by the test. Nothing is delivered before the test
 * says so: a run that is never driven stays silent (which is how an idle timeout is tested). Events go
 * straight into the run's sink, without waiting for its reader; after the run ended or was cancelled, nothing
 * more is delivered.
 */
export interface ScriptedRun {
  /** What the edge asked the provider to run. */
  readonly request: SubmitRunRequest
  /** Delivers `events` as one batch; a terminal event among them ends the run (the events after it are dropped). */
  readonly emit: (...events: ReadonlyArray<RunEvent.RunEvent>) => Effect.Effect<void>
  /**
   * The upstream accepted the run (answered 200) before its first event: the edge starts the response (headers,
   * the API's opening event, keep-alives) without waiting for output.
   */
  readonly accept: Effect.Effect<void>
  /** A content delta. */
  readonly text: (text: string) => Effect.Effect<void>
  /** The terminal `Complete` (`finish_reason: "stop"`, with `usage` when given): the run ends. */
  readonly complete: (usage?: RunEvent.Usage) => Effect.Effect<void>
  /** The terminal `Failed` event with `reason` (the provider failed): the run ends. */
  readonly fail: (reason: string) => Effect.Effect<void>
  /** Ends the run without a terminal event (the chat plane's broken stream, `run stream closed`). */
  readonly end: Effect.Effect<void>
  /**
   * Completes once the edge closed the run's scope while the run was still running: the proof that a
   * cancellation (caller gone, idle timeout, shutdown) reached the provider. Never completes for a run that
   * ended first.
   */
  readonly cancelled: Effect.Effect<void>
  /** Whether the edge still holds the run (its scope is open), ended or not. */
  readonly isOpen: Effect.Effect<boolean>
  readonly state: Effect.Effect<RunState>
}

export declare namespace ScriptedProvider {
  export interface Service {
    /** Serve it with `LocalNode.layerModel(model, scripted.provider)` (or use `ScriptedProvider.layer`). */
    readonly provider: Provider
    /** The next run the edge starts on this provider, in start order (waits until there is one). */
    readonly nextRun: Effect.Effect<ScriptedRun>
    /** Every run started so far, in start order. */
    readonly runs: Effect.Effect<ReadonlyArray<ScriptedRun>>
  }
}

const playable = (steps: Iterable<Step.Step>): ReadonlyArray<Step.Step> => Array.from(steps)

const build = (steps: ReadonlyArray<Step.Step> | undefined): Effect.Effect<ScriptedProvider.Service> =>
  Effect.gen(function* () {
    const queue = yield* Queue.unbounded<ScriptedRun>()
    const started: Array<ScriptedRun> = []

    const start = (request: SubmitRunRequest, sink: RunSink): Effect.Effect<void, never, Scope.Scope> =>
      Effect.gen(function* () {
        const cancelled = yield* Deferred.make<void>()
        let state: RunState = "running"
        let open = true
        const finish = () => {
          if (state !== "running") return
          state = "ended"
          sink.end()
        }
        // As a provider does: the batch goes whole (the run's channel drops what follows a terminal event).
        const deliver = (events: ReadonlyArray<RunEvent.RunEvent>) => {
          if (state !== "running" || events.length === 0) return
          sink.emit(events)
          if (events.some(RunEvent.isTerminal)) finish()
        }
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            open = false
            if (state !== "running") return
            state = "cancelled"
            Deferred.unsafeDone(cancelled, Effect.void)
          })
        )
        const emit = (...events: ReadonlyArray<RunEvent.RunEvent>) => Effect.sync(() => deliver(events))
        const run: ScriptedRun = {
          request,
          emit,
          accept: Effect.sync(() => {
            if (state === "running") sink.accept()
          }),
          text: (text) => emit(RunEvent.delta(text)),
          complete: (usage) => emit(Step.complete(usage)),
          fail: (reason) => emit(Step.fail(reason)),
          end: Effect.sync(finish),
          cancelled: Deferred.await(cancelled),
          isOpen: Effect.sync(() => open),
          state: Effect.sync(() => state)
        }
        started.push(run)
        yield* Queue.offer(queue, run)
        if (steps !== undefined) yield* Effect.forkScoped(play(steps, deliver, finish))
      })

    return {
      provider: { start },
      nextRun: Queue.take(queue),
      runs: Effect.sync(() => started.slice())
    }
  })

/** Plays `steps`, consecutive events as one batch; a terminal event ends the run (`deliver` then ignores the rest). */
const play = (
  steps: ReadonlyArray<Step.Step>,
  deliver: (events: ReadonlyArray<RunEvent.RunEvent>) => void,
  finish: () => void
): Effect.Effect<void> =>
  Effect.gen(function* () {
    let batch: Array<RunEvent.RunEvent> = []
    const flush = () => {
      deliver(batch)
      batch = []
    }
    for (const step of steps) {
      switch (step._tag) {
        case "Sleep":
          flush()
          yield* Effect.sleep(step.duration)
          break
        case "Stall":
          flush()
          return yield* Effect.never
        case "End":
          flush()
          return finish()
        default:
          batch.push(step)
      }
    }
    flush()
    finish()
  })

/** The model (or models) the scripted provider serves: ids, or options (`{ id: "strict", output: { strict: true } }`). */
export type Models = LocalNode.ModelInput | ReadonlyArray<LocalNode.ModelInput>

const isList = (models: Models): models is ReadonlyArray<LocalNode.ModelInput> => Array.isArray(models)

export interface LayerOptions {
  /** Every run plays these steps (`Step.*`); without them each run waits for the test to drive it. */
  readonly script?: Iterable<Step.Step>
  /** Runs each model's node takes at once (default: unlimited). */
  readonly maxConcurrentRuns?: number
}

const layer = (models: Models, options: LayerOptions = {}): Layer.Layer<ScriptedProvider, never, NodeRegistry> =>
  Layer.unwrapEffect(
    Effect.map(build(options.script === undefined ? undefined : playable(options.script)), (scripted) => {
      const list = isList(models) ? models : [models]
      const serveOptions = options.maxConcurrentRuns === undefined ? undefined : { maxConcurrentRuns: options.maxConcurrentRuns }
      const nodes = list.map((model) => LocalNode.layerModel(model, scripted.provider, serveOptions))
      return Layer.mergeAll(Layer.succeed(ScriptedProvider, scripted), ...nodes)
    })
  )

/**
 * A provider whose runs the test drives, as a service. Three ways to get one:
 *
 * - `ScriptedProvider.layer("mine")`: serves model `mine` through `LocalNode.layerModel` and provides this service,
 *   for `TestEdge.layer({ nodes: ScriptedProvider.layer("mine") })`; then `yield* ScriptedProvider` in the test.
 *   `ScriptedProvider.layer("mine", { script: [Step.text("hi"), Step.complete()] })` plays a script on every run.
 * - `ScriptedProvider.make`: the service as a value, served with `LocalNode.layerModel("mine", scripted.provider)`
 *   (several scripted models, each with its own).
 * - `ScriptedProvider.script(steps)`: the same, every run playing `steps`.
 *
 * Each run is a `ScriptedRun` (`nextRun`, `runs`): its request, `emit`/`text`/`complete`/`fail`/`end` to drive
 * it, and `cancelled`/`isOpen`/`state` to see what the edge did with it. Scripts sleep by Effect's `Clock`, so
 * `TestClock` drives them.
 */
export class ScriptedProvider extends Context.Tag("iop-edge/testing/ScriptedProvider")<
  ScriptedProvider,
  ScriptedProvider.Service
>() {
  /** A scripted provider whose runs wait for the test to drive them. */
  static readonly make: Effect.Effect<ScriptedProvider.Service> = build(undefined)
  /** A scripted provider whose every run plays `steps` (and may still be driven by the test). */
  static readonly script = (steps: Iterable<Step.Step>): Effect.Effect<ScriptedProvider.Service> => build(playable(steps))
  /** Serves `models` with one scripted provider (each model its own local node) and provides it as this service. */
  static readonly layer = layer
}
