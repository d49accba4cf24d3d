import type * as HttpClient from "@effect/platform/HttpClient"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { ModelConfig } from "../config/EdgeConfig.js"
import * as Echo from "../providers/echo/Echo.js"
import * as OpenAiProvider from "../providers/openai/OpenAiProvider.js"
import type { Provider } from "../providers/Provider.js"
import * as RunEvent from "../run/RunEvent.js"
import type { NodeId, RunId } from "../run/RunEvent.js"
import type { SubmitRunRequest } from "../run/SubmitRunRequest.js"

/** Hosts the providers of its models and executes runs with them. */
export interface Node {
  readonly id: NodeId
  readonly models: ReadonlyArray<string>
  readonly maxConcurrentRuns: number
  /**
   * Executes a run. The stream ends with exactly one terminal event; a
   * provider failure becomes `Failed`, a node-side cancellation `Cancelled`.
   * Interrupting the stream aborts the provider's work.
   */
  readonly execute: (runId: RunId, request: SubmitRunRequest) => Stream.Stream<RunEvent.RunEvent>
  /** Cancels every active run (its caller gets a `Cancelled` event). */
  readonly cancelAll: (message: string) => Effect.Effect<void>
  readonly activeRuns: Effect.Effect<number>
}

class RunCancelled extends Schema.TaggedError<RunCancelled>()("RunCancelled", { message: Schema.String }) {}

export const makeProvider = (model: ModelConfig): Effect.Effect<Provider, never, HttpClient.HttpClient> => {
  const p = model.provider
  switch (p.type) {
    case "echo":
      return Effect.succeed(Echo.make({ tokenDelayMs: p.tokenDelayMs }))
    case "openai":
      return OpenAiProvider.make({
        baseUrl: p.baseUrl,
        upstreamModel: p.model ?? model.id,
        apiKey: p.apiKey,
        toolMode: model.tools,
        ...(p.headers !== undefined ? { headers: p.headers } : {})
      })
  }
}

export const make = (options: {
  readonly id: NodeId
  readonly models: ReadonlyArray<ModelConfig>
  readonly maxConcurrentRuns: number
}): Effect.Effect<Node, never, HttpClient.HttpClient> =>
  Effect.gen(function* () {
    const providers = new Map<string, Provider>()
    for (const model of options.models) providers.set(model.id, yield* makeProvider(model))
    const active = yield* Ref.make(new Map<RunId, Deferred.Deferred<never, RunCancelled>>())

    const track = (runId: RunId) =>
      Effect.acquireRelease(
        Deferred.make<never, RunCancelled>().pipe(
          Effect.tap((cancel) => Ref.update(active, (m) => new Map(m).set(runId, cancel)))
        ),
        () =>
          Ref.update(active, (m) => {
            const next = new Map(m)
            next.delete(runId)
            return next
          })
      )

    const execute = (runId: RunId, request: SubmitRunRequest): Stream.Stream<RunEvent.RunEvent> =>
      Option.match(Option.fromNullable(providers.get(request.model)), {
        onNone: () => Stream.make(RunEvent.failed(`node ${options.id} does not serve model "${request.model}"`)),
        onSome: (provider) =>
          Stream.unwrapScoped(
            track(runId).pipe(
              Effect.map((cancel) =>
                provider.run(request).pipe(
                  Stream.catchAll((e) => Stream.make(RunEvent.failed(e.message))),
                  Stream.concat(Stream.make(RunEvent.failed("provider ended the run without completing it"))),
                  Stream.takeUntil(RunEvent.isTerminal),
                  Stream.interruptWhen(Deferred.await(cancel)),
                  Stream.catchAll((e) => Stream.make(RunEvent.cancelled(e.message)))
                )
              )
            )
          )
      })

    const cancelAll = (message: string) =>
      Ref.get(active).pipe(
        Effect.flatMap((m) =>
          Effect.forEach(m.values(), (d) => Deferred.fail(d, new RunCancelled({ message })), { discard: true })
        )
      )

    return {
      id: options.id,
      models: options.models.map((m) => m.id),
      maxConcurrentRuns: options.maxConcurrentRuns,
      execute,
      cancelAll,
      activeRuns: Ref.get(active).pipe(Effect.map((m) => m.size))
    } satisfies Node
  })
