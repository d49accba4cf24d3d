import type * as HttpClient from "@effect/platform/HttpClient"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
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

    const cancellers = new Map<RunId, (message: string) => Effect.Effect<void>>()

    /**
     * The provider runs in a fiber of its own, feeding a queue the caller
     * reads: cancelling interrupts that fiber (aborting the upstream request)
     * and ends the queue with a Cancelled event, with no per-event cost; the
     * caller leaving closes the scope, which interrupts the fiber too.
     */
    const run = (runId: RunId, provider: Provider, request: SubmitRunRequest) =>
      Effect.gen(function* () {
        const queue = yield* Effect.acquireRelease(Queue.bounded<Take.Take<RunEvent.RunEvent>>(32), Queue.shutdown)
        const producer = yield* provider.run(request).pipe(
          Stream.catchAll((e) => Stream.make(RunEvent.failed(e.message))),
          Stream.concat(Stream.make(RunEvent.failed("provider ended the run without completing it"))),
          Stream.takeUntil(RunEvent.isTerminal),
          Stream.runIntoQueue(queue),
          Effect.forkScoped
        )
        const cancel = (message: string) =>
          Fiber.interrupt(producer).pipe(
            Effect.zipRight(Queue.offerAll(queue, [Take.of(RunEvent.cancelled(message)), Take.end]))
          )
        yield* Effect.acquireRelease(
          Effect.sync(() => cancellers.set(runId, cancel)),
          () => Effect.sync(() => cancellers.delete(runId))
        )
        return Stream.fromQueue(queue).pipe(Stream.flattenTake)
      })

    const execute = (runId: RunId, request: SubmitRunRequest): Stream.Stream<RunEvent.RunEvent> => {
      const provider = providers.get(request.model)
      return provider === undefined
        ? Stream.make(RunEvent.failed(`node ${options.id} does not serve model "${request.model}"`))
        : Stream.unwrapScoped(run(runId, provider, request))
    }

    const cancelAll = (message: string) =>
      Effect.forEach(Array.from(cancellers.values()), (cancel) => cancel(message), { discard: true })

    return {
      id: options.id,
      models: options.models.map((m) => m.id),
      maxConcurrentRuns: options.maxConcurrentRuns,
      execute,
      cancelAll,
      activeRuns: Effect.sync(() => cancellers.size)
    } satisfies Node
  })
