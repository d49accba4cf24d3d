import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as RunEvent from "../protocol/RunEvent.js"
import type { RunSink } from "../protocol/RunSink.js"
import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"

/** A provider failed before or while producing events (it becomes the run's `Failed` event). */
export class ProviderError extends Schema.TaggedError<ProviderError>()("ProviderError", {
  provider: Schema.String,
  message: Schema.String
}) {}

/**
 * Executes runs for one configured model. `start` begins a run whose events
 * go into `sink` and returns at once; closing the scope stops the run (an
 * upstream HTTP request is aborted, not left running). A provider never
 * fails: its failures are the run's `Failed` event.
 */
export interface Provider {
  readonly start: (request: SubmitRunRequest, sink: RunSink) => Effect.Effect<void, never, Scope.Scope>
}

/**
 * A provider from an Effect `Stream` of run events: the stream runs in a
 * fiber of the run's scope, one `emit` per chunk; a `ProviderError` becomes
 * the run's `Failed` event. The simplest way to write a provider; the
 * built-in OpenAI provider writes from its body reader instead, with no fiber.
 */
export const fromStream = (
  run: (request: SubmitRunRequest) => Stream.Stream<RunEvent.RunEvent, ProviderError>
): Provider => ({
  start: (request, sink) =>
    run(request).pipe(
      // A reader that fell behind holds the producer back until it catches up.
      Stream.runForEachChunk((chunk) =>
        sink.emit(Chunk.toReadonlyArray(chunk))
          ? Effect.void
          : Effect.async<void>((resume) => sink.onReady(() => resume(Effect.void)))
      ),
      Effect.catchAll((e) => Effect.sync(() => sink.emit([RunEvent.failed(e.message)]))),
      Effect.ensuring(Effect.sync(() => sink.end())),
      Effect.forkScoped,
      Effect.asVoid
    )
})
