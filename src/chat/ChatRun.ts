import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { randomInt } from "node:crypto"
import { Metrics } from "../observability/Metrics.js"
import type { SubmitError } from "../protocol/errors.js"
import type { RunDispatch } from "../run/RunHandle.js"
import { RunService } from "../run/RunService.js"
import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"
import type { ChatRequest } from "./ChatRequest.js"
import { RunFailed, ToolValidationRetryFailed } from "./errors.js"
import { type FoldTiming, report } from "./runReport.js"
import { makeRunTrace } from "./runTrace.js"
import * as RunSpans from "./runSpans.js"
import * as Session from "./session.js"
import { type ChatRun, makeChatRun } from "./SessionRun.js"
import { newToolCallId } from "./toolcalls/native.js"
import { choiceBinds } from "./toolcalls/validate.js"
import { onCloseLogged } from "../common/onClose.js"
import type { ReasoningMemory } from "./reasoningMemory.js"

export type { ChatRun } from "./SessionRun.js"
export { runOutcome } from "./SessionRun.js"
export { outcomeOf } from "./runReport.js"

/**
 * The chat plane's one pipeline: a run's events folded through the session (`SessionRun.ts`), read batch by batch
 * by whoever writes the response. Live streams render each batch as it comes; strict-buffered streams and
 * non-stream requests collect (with exact-replay retries) and then render. Each run's metrics and its one summary
 * log line are written as it ends (`runReport.ts`), from the session's terminal.
 */
/** A run collected to its end. */
export interface Collected {
  readonly dispatch: RunDispatch
  readonly emissions: ReadonlyArray<Session.Emission>
  readonly terminal: Session.Terminal
}

export declare namespace Chat {
  export interface Service {
    /**
     * Submits the run in the caller's scope (closing it cancels the run). Fails only before anything ran. `span`:
     * the request's run span when the caller traces (its attempt is a child of it).
     */
    readonly open: (request: ChatRequest, span?: RunSpans.RunSpan) => Effect.Effect<ChatRun, SubmitError, Scope.Scope>
    /**
     * Runs to the end; a strict request whose tool calls do not validate is
     * replayed exactly (its metadata carrying `attempt`, `failed_run_id` and
     * `reason`) until they do or `toolValidationAttempts` runs were used.
     * The first submission's error fails here; a retry's is the outcome.
     */
    readonly collect: (request: ChatRequest, span?: RunSpans.RunSpan) => Effect.Effect<Collected, SubmitError>
  }
}

export class Chat extends Context.Tag("@iop/edge/Chat")<Chat, Chat.Service>() {}

export interface ChatOptions {
  /** `runs.toolValidationAttempts`. */
  readonly toolValidationAttempts: number
  /** `log.traceStreams`: requests may ask for every emission to be logged. */
  readonly traceStreams: boolean
  /** Where reasoning continuity keeps answers' reasoning (`runs.reasoningMemory`); none: continuity is off. */
  readonly reasoningMemory?: ReasoningMemory
}

const sessionConfig = (request: ChatRequest): Session.SessionConfig => ({
  policy: request.policy,
  tools: request.tools,
  toolChoice: request.toolChoice,
  parallelToolCalls: request.submit.parallelToolCalls,
  newToolCallId: () => newToolCallId(() => randomInt(0x7fffffff) / 0x7fffffff)
})

export const make = (options: ChatOptions): Effect.Effect<Chat.Service, never, RunService | Metrics> =>
  Effect.gen(function* () {
    const runs = yield* RunService
    const metrics = yield* Metrics

    const traced = (request: ChatRequest) =>
      options.traceStreams && request.submit.metadata["iop_trace_stream"] === "true"

    const memory = options.reasoningMemory
    const continued = (request: ChatRequest): ReasoningMemory | undefined =>
      request.model.reasoning.continuity ? memory : undefined
    // One caller's reasoning goes back into that caller's requests to the same model only.
    const partitionOf = (request: ChatRequest) => `${request.model.id}\u0000${request.caller ?? ""}`

    /** The request with the reasoning of the assistant turns it sent back without it, where remembered. */
    const withReasoning = (request: ChatRequest): Effect.Effect<ChatRequest> => {
      const kept = continued(request)
      if (kept === undefined) return Effect.succeed(request)
      return Effect.suspend(() => {
        const { matches, messages } = kept.restore(partitionOf(request), request.submit.messages)
        const counted = Effect.forEach(matches, (match) => metrics.reasoningContinuity(request.model.id, match), {
          discard: true
        })
        return Effect.as(
          counted,
          messages === request.submit.messages ? request : { ...request, submit: { ...request.submit, messages } }
        )
      })
    }

    /** An answer's reasoning, remembered for the turn a client sends back without it. */
    const rememberAnswer = (request: ChatRequest, session: Session.Session): void => {
      const kept = continued(request)
      if (kept === undefined || session._tag !== "Closed" || session.terminal._tag !== "Finish") return
      kept.remember(partitionOf(request), session.summary)
    }

    /** The most runs a request may use: replays for a strict one, or one whose `tool_choice` a reply may break. */
    const attemptsOf = (request: ChatRequest) =>
      request.policy.strict || choiceBinds(request.toolChoice) ? options.toolValidationAttempts : 1

    /** The run's submission; traced, with the attempt's span as its trace context (ended here if it fails). */
    const submitTraced = (submit: SubmitRunRequest, spans: RunSpans.AttemptSpans | undefined) =>
      spans === undefined
        ? runs.submit(submit)
        : Effect.onError(
          runs.submit(RunSpans.carrying(submit, spans)),
          (cause) => Effect.sync(() => RunSpans.attemptNotRun(spans, Option.getOrUndefined(Cause.failureOption(cause))))
        )

    const openAttempt = (
      request: ChatRequest,
      submit: SubmitRunRequest,
      attempt: number,
      attempts: number,
      span: RunSpans.RunSpan | undefined
    ) =>
      Effect.gen(function* () {
        const startedAt = yield* Clock.currentTimeMillis
        const folds: FoldTiming = { submittedAt: performance.now(), processingMs: 0 }
        const spans = span === undefined ? undefined : RunSpans.beginAttempt(span, attempt, submit)
        const handle = yield* submitTraced(submit, spans)
        yield* metrics.runStarted
        // Trace lines are logged on the caller's runtime (its loggers and annotations), from whichever callback read.
        const trace = traced(request)
          ? { trace: makeRunTrace(handle.dispatch), flush: Runtime.runSync(yield* Effect.runtime<never>()) }
          : undefined
        const run = makeChatRun({ handle, config: sessionConfig(request), folds, ...(trace === undefined ? {} : { trace }) })
        // Registered after the run's own finalizers, so it runs first: the summary is written as the run ends.
        yield* onCloseLogged(Effect.suspend(() => {
          rememberAnswer(request, run.session())
          return report(metrics, {
            request,
            dispatch: handle.dispatch,
            session: run.session(),
            folds,
            tokens: handle.timing,
            startedAt,
            attempt,
            attempts,
            spans
          })
        }))
        return run
      })

    // A live response cannot take back what it wrote: its one run is the request.
    const open = (request: ChatRequest, span?: RunSpans.RunSpan) =>
      continued(request) === undefined
        ? openAttempt(request, request.submit, 1, 1, span)
        : Effect.flatMap(withReasoning(request), (ready) => openAttempt(ready, ready.submit, 1, 1, span))

    /**
     * Every emission of a run, collected from the run's own callbacks (`poll` + `whenReady(settled)`): one wait for the
     * whole run, not a fiber resume per batch, and a fold per settled read (the run's end, or a full channel),
     * not per upstream read. A defect while folding fails the wait, never the provider's callback.
     */
    const drain = (run: ChatRun) =>
      Effect.async<ReadonlyArray<Session.Emission>>((resume) => {
        const emissions: Array<Session.Emission> = []
        let left = false
        const pump = (): void => {
          if (left) return
          try {
            for (;;) {
              const out = run.poll()
              if (out === "ended") return resume(Effect.succeed(emissions))
              if (out === "pending") return run.whenReady(pump, "settled")
              for (const e of out) emissions.push(e)
            }
          } catch (defect) {
            resume(Effect.die(defect))
          }
        }
        pump()
        // The caller left (interrupted): later wake-ups fold nothing more.
        return Effect.sync(() => {
          left = true
          run.unwatch()
        })
      })

    /** One run, to its terminal, in a scope of its own: its slot is released as soon as it ends. */
    const collectAttempt = (
      request: ChatRequest,
      submit: SubmitRunRequest,
      attempt: number,
      attempts: number,
      span: RunSpans.RunSpan | undefined
    ) =>
      Effect.scoped(
        Effect.gen(function* () {
          const run = yield* openAttempt(request, submit, attempt, attempts, span)
          const emissions = yield* drain(run)
          const last = emissions[emissions.length - 1]
          const terminal = last !== undefined && Session.isTerminal(last) ? last : undefined
          // A session always ends with its terminal emission.
          const ended: Session.Terminal = terminal ?? { _tag: "Error", error: new RunFailed({ reason: "run ended without an outcome" }) }
          return { dispatch: run.dispatch, emissions, terminal: ended } satisfies Collected
        })
      )

    const collect = (asked: ChatRequest, span?: RunSpans.RunSpan) =>
      Effect.gen(function* () {
        const request = continued(asked) === undefined ? asked : yield* withReasoning(asked)
        // A reply that breaks `tool_choice` is replayed like a strict one's invalid call.
        const attempts = attemptsOf(request)
        const model = request.submit.model
        let attempt = 1
        let result = yield* collectAttempt(request, request.submit, attempt, attempts, span)
        while (result.terminal._tag === "Error" && result.terminal.error._tag === "ToolValidationFailed") {
          const { reason, tool } = result.terminal.error
          const failedRunId = result.dispatch.runId
          if (attempt >= attempts) {
            yield* metrics.toolValidation(model, "failure")
            yield* Effect.logWarning("tool validation failed").pipe(
              Effect.annotateLogs({ run_id: failedRunId, attempt, reason })
            )
            break
          }
          attempt += 1
          yield* metrics.toolValidation(model, "retry")
          yield* Effect.logWarning("tool validation retry").pipe(
            Effect.annotateLogs({ failed_run_id: failedRunId, attempt, reason, replay_tool: tool ?? null })
          )
          // `replayTool`: a provider that can constrain its upstream asks for a valid call of the tool to blame.
          const replay: SubmitRunRequest = {
            ...request.submit,
            ...(tool === undefined ? {} : { replayTool: tool }),
            metadata: { ...request.submit.metadata, attempt: String(attempt), failed_run_id: failedRunId, reason }
          }
          const next = yield* Effect.exit(collectAttempt(request, replay, attempt, attempts, span))
          if (Exit.isSuccess(next)) {
            result = next.value
            continue
          }
          // The retry could not be submitted: that is this request's outcome (nothing was written yet).
          const submitError = next.cause._tag === "Fail" ? next.cause.error : undefined
          if (submitError === undefined) return yield* Effect.failCause(next.cause)
          result = {
            dispatch: result.dispatch,
            emissions: [],
            terminal: { _tag: "Error", error: new ToolValidationRetryFailed({ reason: submitError.message }) }
          }
          break
        }
        return result
      })

    return { open, collect } satisfies Chat.Service
  })

export const layer = (options: ChatOptions): Layer.Layer<Chat, never, RunService | Metrics> =>
  Layer.effect(Chat, make(options))
