import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { randomInt } from "node:crypto"
import { EdgeConfig, type ModelConfig } from "../config/EdgeConfig.js"
import { Metrics, type Outcome } from "../observability/Metrics.js"
import type { SubmitError } from "../run/errors.js"
import { type RunHandle, RunService } from "../run/RunService.js"
import type { SubmitRunRequest } from "../run/SubmitRunRequest.js"
import * as Chunks from "./chunks.js"
import { NoNodeAccepted, type RunOutcomeError, RunFailed, RunTimedOut, ToolValidationRetryFailed } from "./errors.js"
import type { OutputPolicy } from "./policy.js"
import { RunTally } from "./RunTally.js"
import * as Session from "./session.js"
import { newToolCallId } from "./toolcalls/native.js"
import type { RequestTool, ToolChoiceMode } from "./toolcalls/types.js"

const traceText = (e: Session.Emission): string => {
  switch (e._tag) {
    case "Content":
    case "Reasoning":
      return e.text
    case "ToolCalls":
      return JSON.stringify(e.calls)
    case "Finish":
      return e.finishReason
    case "Error":
      return e.error.message
  }
}

/** A chat completion request the chat plane can run: decoded, its model resolved, its policy decided. */
export interface ChatRequest {
  readonly model: ModelConfig
  readonly submit: SubmitRunRequest
  readonly policy: OutputPolicy
  readonly tools: ReadonlyArray<RequestTool>
  readonly toolChoice: ToolChoiceMode
  readonly includeUsage: boolean
}

export declare namespace ChatCompletions {
  export interface Service {
    /**
     * Submits the run and returns the SSE items of its response. Submission
     * errors fail here (before anything is written); everything after ends the
     * stream with one terminal item. The run lives in the caller's scope.
     */
    readonly stream: (request: ChatRequest) => Effect.Effect<Stream.Stream<Chunks.StreamItem>, SubmitError, Scope.Scope>
    /** Runs to the end (with strict retries) and returns the `chat.completion` body. */
    readonly complete: (request: ChatRequest) => Effect.Effect<unknown, SubmitError | RunOutcomeError>
  }
}

export class ChatCompletions extends Context.Tag("@iop/edge/ChatCompletions")<
  ChatCompletions,
  ChatCompletions.Service
>() {}

const sessionConfig = (request: ChatRequest): Session.SessionConfig => ({
  policy: request.policy,
  tools: request.tools,
  toolChoice: request.toolChoice,
  newToolCallId: () => newToolCallId(() => randomInt(0x7fffffff) / 0x7fffffff)
})

const outcomeOf = (terminal: Session.Terminal | undefined): Outcome => {
  if (terminal === undefined) return "cancelled"
  if (terminal._tag === "Finish") return "success"
  switch (terminal.error._tag) {
    case "RunTimedOut":
      return "timeout"
    case "ToolValidationFailed":
    case "ToolValidationRetryFailed":
      return "tool_validation_error"
    case "RunFailed":
    case "NoNodeAccepted":
      return "error"
  }
}

interface Owned {
  readonly handle: RunHandle
  readonly startedAt: number
  readonly tally: RunTally
  readonly release: Effect.Effect<void>
}

export const make = Effect.gen(function* () {
  const runs = yield* RunService
  const metrics = yield* Metrics
  const config = yield* EdgeConfig
  const idle = Duration.millis(config.runs.idleTimeoutMs)

  /**
   * The run's events folded through the session: emissions ending with
   * exactly one terminal. The tally sees each chunk arrive and leave.
   */
  const emissions = (request: ChatRequest, handle: RunHandle, tally: RunTally): Stream.Stream<Session.Emission> =>
    handle.events.pipe(
      Stream.timeoutFail(() => new RunTimedOut({ idleMs: config.runs.idleTimeoutMs }), idle),
      Stream.catchAll((e) =>
        Stream.make(
          Session.outcome(
            e._tag === "RunTimedOut"
              ? e
              : e._tag === "NodeUnavailable"
              ? new NoNodeAccepted({ reason: e.reason })
              : new RunFailed({ reason: e.message })
          )
        )
      ),
      Stream.mapChunks((chunk) => {
        tally.arrived(chunk)
        return chunk
      }),
      fold(request, handle),
      Stream.takeUntil(Session.isTerminal),
      Stream.mapChunks((chunk) => {
        tally.processed(chunk)
        return chunk
      })
    )

  /** The session fold; with trace mode on for the request, every emission and suppressed delta is logged. */
  const fold =
    (request: ChatRequest, handle: RunHandle) =>
    <E, R>(inputs: Stream.Stream<Session.SessionInput, E, R>): Stream.Stream<Session.Emission, E, R> => {
      const initial = Session.initial(sessionConfig(request))
      if (!(config.log.traceStreams && request.submit.metadata["iop_trace_stream"] === "true")) {
        return inputs.pipe(Stream.mapAccum(initial, Session.step), Stream.mapConcat((out) => out))
      }
      let seq = 0
      const trace = (input: Session.SessionInput, out: ReadonlyArray<Session.Emission>) =>
        out.length === 0 && (input._tag === "Delta" || input._tag === "ReasoningDelta")
          ? Effect.logInfo("stream output suppressed").pipe(
            Effect.annotateLogs({ run_id: handle.dispatch.runId, seq, type: input._tag, source: input.text })
          )
          : Effect.forEach(out, (e) =>
            Effect.logInfo("stream output chunk").pipe(
              Effect.annotateLogs({ run_id: handle.dispatch.runId, seq: ++seq, type: e._tag, emission: traceText(e) })
            ), { discard: true })
      return inputs.pipe(
        Stream.mapAccum(initial, (s, input) => {
          const [next, out] = Session.step(s, input)
          return [next, { input, out }] as const
        }),
        Stream.tap(({ input, out }) => trace(input, out)),
        Stream.mapConcat(({ out }) => out)
      )
    }

  const context = (request: ChatRequest, handle: RunHandle, created: number): Chunks.ResponseContext => ({
    id: `chatcmpl-${handle.dispatch.runId.slice(4)}`,
    created,
    model: request.submit.model,
    reasoningField: request.policy.reasoningField,
    includeUsage: request.includeUsage
  })

  const finishRun = (request: ChatRequest, handle: RunHandle, tally: RunTally, startedAt: number, attempt: number) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const outcome = outcomeOf(tally.terminal)
      const model = request.submit.model
      yield* metrics.run({
        model,
        outcome,
        durationMs: now - startedAt,
        ttftMs: tally.ttftMs,
        interTokenMs: tally.interTokenMs,
        overheadMs: tally.overheadMs
      })
      if (tally.usage !== undefined) yield* metrics.usage({ model, outcome }, tally.usage)
      yield* metrics.reasoningChars(model, tally.reasoningChars)
      const terminal = tally.terminal
      yield* Effect.logInfo("run finished").pipe(
        Effect.annotateLogs({
          run_id: handle.dispatch.runId,
          node_id: handle.dispatch.nodeId,
          model,
          attempt,
          outcome,
          duration_ms: now - startedAt,
          finish_reason: terminal?._tag === "Finish" ? terminal.finishReason : null,
          error: terminal?._tag === "Error" ? terminal.error.message : null,
          content_chars: tally.contentChars,
          reasoning_chars: tally.reasoningChars,
          tool_calls: tally.toolCalls,
          ttft_ms: tally.ttftMs ?? null,
          overhead_ms: Math.round(tally.overheadMs * 1000) / 1000,
          normalized: tally.normalised,
          input_tokens: tally.usage?.inputTokens ?? null,
          output_tokens: tally.usage?.outputTokens ?? null,
          reasoning_tokens: tally.usage?.reasoningTokens ?? null,
          cached_tokens: tally.usage?.cachedInputTokens ?? null
        })
      )
      yield* Effect.logDebug("run preview").pipe(
        Effect.annotateLogs({
          run_id: handle.dispatch.runId,
          content_preview: tally.contentPreview,
          reasoning_preview: tally.reasoningPreview
        })
      )
    })

  /** A run submitted in a scope of its own, so that its slot is released as soon as it ends. */
  const submitOwned = (submit: SubmitRunRequest) =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const startedAt = yield* Clock.currentTimeMillis
      const requestedAt = performance.now()
      const handle = yield* runs.submit(submit).pipe(
        Scope.extend(scope),
        Effect.onError(() => Scope.close(scope, Exit.void))
      )
      yield* metrics.runStarted
      return { handle, startedAt, tally: new RunTally(requestedAt), release: Scope.close(scope, Exit.void) } satisfies Owned
    })

  /** One run, collected whole. */
  const collectRun = (request: ChatRequest, owned: Owned, attempt: number) =>
    Effect.gen(function* () {
      const tally = owned.tally
      const out = yield* emissions(request, owned.handle, tally).pipe(
        Stream.runCollect,
        Effect.onExit(() => finishRun(request, owned.handle, tally, owned.startedAt, attempt)),
        Effect.ensuring(owned.release)
      )
      return { handle: owned.handle, emissions: Array.from(out), terminal: tally.terminal }
    })

  /**
   * Runs until the tool calls validate or the attempts are used. A retry is
   * an exact replay of the request, its metadata carrying the attempt number,
   * the failed run id and the reason.
   */
  const collectValidated = (request: ChatRequest, first: Owned) =>
    Effect.gen(function* () {
      const attempts = request.policy.strict ? config.runs.toolValidationAttempts : 1
      let attempt = 1
      let result = yield* collectRun(request, first, attempt)
      while (result.terminal?._tag === "Error" && result.terminal.error._tag === "ToolValidationFailed") {
        const reason = result.terminal.error.reason
        if (attempt >= attempts) {
          yield* metrics.toolValidation(request.submit.model, "failure")
          yield* Effect.logWarning("tool validation failed").pipe(
            Effect.annotateLogs({ run_id: result.handle.dispatch.runId, attempt, reason })
          )
          break
        }
        attempt += 1
        yield* metrics.toolValidation(request.submit.model, "retry")
        yield* Effect.logWarning("tool validation retry").pipe(
          Effect.annotateLogs({ failed_run_id: result.handle.dispatch.runId, attempt, reason })
        )
        const replay: SubmitRunRequest = {
          ...request.submit,
          metadata: {
            ...request.submit.metadata,
            attempt: String(attempt),
            failed_run_id: result.handle.dispatch.runId,
            reason
          }
        }
        const owned = yield* submitOwned(replay).pipe(
          Effect.mapError((e) => new ToolValidationRetryFailed({ reason: e.message }))
        )
        result = yield* collectRun(request, owned, attempt)
      }
      return result
    })

  const complete = (request: ChatRequest) =>
    Effect.gen(function* () {
      const created = Math.floor((yield* Clock.currentTimeMillis) / 1000)
      const first = yield* submitOwned(request.submit)
      const result = yield* collectValidated(request, first).pipe(
        Effect.onInterrupt(() =>
          first.release.pipe(
            Effect.zipRight(metrics.request({ model: request.submit.model, stream: false, outcome: "cancelled" }))
          )
        )
      )
      yield* metrics.request({ model: request.submit.model, stream: false, outcome: outcomeOf(result.terminal) })
      const rendered = Chunks.completion(context(request, result.handle, created), result.emissions)
      return rendered._tag === "Body" ? rendered.body : yield* Effect.fail(rendered.error)
    }).pipe(
      Effect.tapErrorTag("ToolValidationRetryFailed", () =>
        metrics.request({ model: request.submit.model, stream: false, outcome: "tool_validation_error" })
      ),
      Effect.withSpan("ChatCompletions.complete")
    )

  const stream = Effect.fn("ChatCompletions.stream")(function* (request: ChatRequest) {
    const created = Math.floor((yield* Clock.currentTimeMillis) / 1000)
    const model = request.submit.model
    if (request.policy.buffered) return yield* bufferedStream(request, created)
    const startedAt = yield* Clock.currentTimeMillis
    const tally = new RunTally(performance.now())
    const handle = yield* runs.submit(request.submit)
    yield* metrics.runStarted
    const ctx = context(request, handle, created)
    const body = emissions(request, handle, tally).pipe(Stream.mapConcat((e) => Chunks.streamItems(ctx, e)))
    return Stream.make(Chunks.roleChunk(ctx)).pipe(
      Stream.concat(body),
      track(model, () => tally.terminal, finishRun(request, handle, tally, startedAt, 1))
    )
  })

  /** Strict stream buffer: nothing is written until a validated result (or the final error) is known. */
  const bufferedStream = (request: ChatRequest, created: number) =>
    Effect.gen(function* () {
      // The first submission happens now so that "no node" is still an HTTP error.
      const first = yield* submitOwned(request.submit)
      yield* Effect.addFinalizer(() => first.release)
      let terminal: Session.Terminal | undefined
      const items = Stream.fromEffect(
        collectValidated(request, first).pipe(
          Effect.map((result): ReadonlyArray<Chunks.StreamItem> => {
            terminal = result.terminal
            // A result that did not validate is written as its error alone, like the non-stream 502.
            if (result.terminal?._tag === "Error") return [{ _tag: "Error", error: result.terminal.error }]
            const ctx = context(request, result.handle, created)
            return [Chunks.roleChunk(ctx), ...result.emissions.flatMap((e) => Chunks.streamItems(ctx, e))]
          }),
          Effect.catchAll((error) => {
            terminal = { _tag: "Error", error }
            return Effect.succeed([{ _tag: "Error", error } satisfies Chunks.StreamItem])
          })
        )
      ).pipe(Stream.mapConcat((items) => items))
      return items.pipe(track(request.submit.model, () => terminal, Effect.void))
    })

  /** Counts the open stream and, when it ends or its caller leaves, the request's outcome. */
  const track =
    (model: string, terminal: () => Session.Terminal | undefined, onEnd: Effect.Effect<void>) =>
    <E, R>(self: Stream.Stream<Chunks.StreamItem, E, R>) =>
      Stream.ensuring(
        Stream.onStart(self, metrics.streamOpened),
        Effect.all([
          metrics.streamClosed,
          onEnd,
          Effect.suspend(() => metrics.request({ model, stream: true, outcome: outcomeOf(terminal()) }))
        ])
      )

  return { stream, complete } satisfies ChatCompletions.Service
})

export const ChatCompletionsLive: Layer.Layer<ChatCompletions, never, RunService | Metrics | EdgeConfig> = Layer.effect(
  ChatCompletions,
  make
)
