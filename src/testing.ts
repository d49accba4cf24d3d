/**
 * `iop-edge/testing`: test your code against the edge the Effect way. It depends on `effect` and
 * `@effect/platform(-node)` only, not on a test runner: the examples use `@effect/vitest`, any runner works.
 *
 * - `TestEdge.layer({ config?, nodes? })`: the edge's services in this process (`Edge.layerFrom` with
 *   `MetricsTest`), serving only the models your `nodes` serve.
 * - `ScriptedProvider`: a provider whose runs the test drives (`nextRun`, then `text` / `complete` / `fail`,
 *   and `cancelled` to prove the edge cancelled it), or that plays a script of `Step`s.
 * - `layerEchoModel(id)`: the built-in echo model without token pacing.
 * - `TestServer.layer(...)`: the same edge served over HTTP on an ephemeral port, with its `url` (for the
 *   openai SDK), an `HttpClient` pointed at it, and `chat` / `chatStream`.
 * - `ScriptedRunService.make(scripts)`: a `RunService` without nodes, each submission playing a script.
 * - `RecordingSink.make`: a sink that records what a provider wrote, to test a provider on its own.
 * - `runRequest(model)`: a `SubmitRunRequest` for `RunService.submit`.
 *
 * ## Time: TestClock
 *
 * The edge reads time from Effect's `Clock`: the idle watchdog, scripted sleeps, keep-alives. A layer is built
 * on the clock of the fiber that provides it, so under `it.effect` / `it.scoped` the whole edge runs on the
 * `TestClock`, and nothing happens until the test moves it. An idle-timeout proof:
 *
 * ```ts
 * import { it, expect } from "@effect/vitest"
 * import { Effect, Fiber, Option, Stream, TestClock } from "effect"
 * import { RunService } from "iop-edge"
 * import { runRequest, ScriptedProvider, TestEdge } from "iop-edge/testing"
 *
 * it.scoped("a silent run times out after 60 s", () =>
 *   Effect.gen(function* () {
 *     const scripted = yield* ScriptedProvider
 *     const runs = yield* RunService.RunService
 *     const handle = yield* runs.submit(runRequest("mine"))
 *     const outcome = yield* Effect.fork(Effect.flip(Stream.runDrain(handle.events)))
 *     yield* scripted.nextRun // started, and never driven: silent
 *     yield* TestClock.adjust("59 seconds")
 *     expect(Option.isNone(yield* Fiber.poll(outcome))).toBe(true)
 *     yield* TestClock.adjust("1 second")
 *     expect((yield* Fiber.join(outcome))._tag).toBe("RunIdle")
 *   }).pipe(Effect.provide(TestEdge.layer({ nodes: ScriptedProvider.layer("mine") })))
 * )
 * ```
 *
 * Thirteen lines, nine of them the test's own steps. It is `it.scoped` because `runs.submit` holds the run
 * in the caller's scope (closing it cancels the run). `RunIdle` is the run plane's idle-timeout error (the chat
 * plane reports it as `RunTimedOut`: HTTP 504, or a `run timed out` SSE error); the limit is the config's
 * `runs.idleTimeoutMs` (`TestEdge.layer({ config: { runs: { idleTimeoutMs: 5_000 } }, nodes })`).
 *
 * The same shape proves cancellation: submit in a `Scope` of the test's own, `run = yield* scripted.nextRun`,
 * close the scope (or, over HTTP, let the client stop reading), then `yield* run.cancelled` completes: the edge
 * closed the run on its provider before the run ended.
 */
export * as TestEdge from "./testing/TestEdge.js"
export {
  type LayerOptions as ScriptedProviderOptions,
  type Models as ScriptedModels,
  type RunState,
  ScriptedProvider,
  type ScriptedRun
} from "./testing/ScriptedProvider.js"
export * as Step from "./testing/Step.js"
export { layerEchoModel } from "./testing/echoModel.js"
export { ErrorResponse, type ServerLayer, type SseEvent, sseEvents, TestServer } from "./testing/TestServer.js"
export * as ScriptedRunService from "./testing/ScriptedRunService.js"
export * as RecordingSink from "./testing/RecordingSink.js"
export { runRequest } from "./testing/runRequest.js"
