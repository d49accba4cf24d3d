import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as LogLevel from "effect/LogLevel"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { randomInt } from "node:crypto"
import { Metrics, type Outcome } from "../observability/Metrics.js"
import type { RunError, SubmitError } from "../run/errors.js"
import type { RunEvent } from "../run/RunEvent.js"
import type { RunRead, TokenTiming } from "../run/RunChannel.js"
import type { RunDispatch } from "../run/RunService.js"
import { RunService } from "../run/RunService.js"
import type { SubmitRunRequest } from "../run/SubmitRunRequest.js"
import type { ChatRequest } from "./ChatRequest.js"
import { NoNodeAccepted, type RunOutcomeError, RunFailed, RunTimedOut, ToolValidationRetryFailed } from "./errors.js"
import * as Session from "./session.js"
import { newToolCallId } from "./toolcalls/native.js"
import { onClose } from "../common/onClose.js"
import { logAnnotated } from "../observability/Logging.js"

/**
 * The chat plane's one pipeline: a run's events folded through the session,
 * pulled batch by batch by whoever writes the response. Live streams render
 * each batch as it comes; strict-buffered streams and non-stream requests
 * collect (with exact-replay retries) and then render. The run's metrics and
 * its one summary log line are written here, from the session's terminal.
 */
export interface ChatRun {
  readonly dispatch: RunDispatch
  /**
   * The emissions of everything that arrived since the last pull (waiting
   * while nothing has); the batch with the terminal emission is the last:
   * after it, `undefined`.
   */
  readonly next: Effect.Effect<ReadonlyArray<Session.Emission> | undefined>
  /**
   * `next` without waiting, for a response body written from callbacks: the emissions of what arrived,
   * `"pending"` while nothing has (`onReady` calls back once something did), `"ended"` after the terminal.
   */
  readonly poll: () => ReadonlyArray<Session.Emission> | "pending" | "ended"
  readonly onReady: (wake: () => void) => void
  /** Calls back once the run ended or its producer had to pause (`poll` then returns a large batch). */
  readonly onSettled: (wake: () => void) => void
}

/** A run collected to its end. */
export interface Collected {
  readonly dispatch: RunDispatch
  readonly emissions: ReadonlyArray<Session.Emission>
  readonly terminal: Session.Terminal
}

export declare namespace Chat {
  export interface Service {
    /** Submits the run in the caller's scope (closing it cancels the run). Fails only before anything ran. */
    readonly open: (request: ChatRequest) => Effect.Effect<ChatRun, SubmitError, Scope.Scope>
    /**
     * Runs to the end; a strict request whose tool calls do not validate is
     * replayed exactly (its metadata carrying `attempt`, `failed_run_id` and
     * `reason`) until they do or `toolValidationAttempts` runs were used.
     * The first submission's error fails here; a retry's is the outcome.
     */
    readonly collect: (request: ChatRequest) => Effect.Effect<Collected, SubmitError>
  }
}

export class Chat extends Context.Tag("@iop/edge/Chat")<Chat, Chat.Service>() {}

export interface ChatOptions {
  /** `runs.toolValidationAttempts`. */
  readonly toolValidationAttempts: number
  /** `log.traceStreams`: requests may ask for every emission to be logged. */
  readonly traceStreams: boolean
}

const sessionConfig = (request: ChatRequest): Session.SessionConfig => ({
  policy: request.policy,
  tools: request.tools,
  toolChoice: request.toolChoice,
  newToolCallId: () => newToolCallId(() => randomInt(0x7fffffff) / 0x7fffffff)
})

/** How the run plane's endings read to the caller. */
export const runOutcome = (e: RunError): RunOutcomeError => {
  switch (e._tag) {
    case "RunIdle":
      return new RunTimedOut({ idleMs: e.idleMs })
    case "NodeUnavailable":
      return new NoNodeAccepted({ reason: e.reason })
    case "NodeDisconnected":
    case "StreamClosed":
    case "RunCancelled":
    case "WriteStalled":
      return new RunFailed({ reason: e.message, cause: e })
  }
}

export const outcomeOf = (terminal: Session.Terminal | undefined): Outcome => {
  if (terminal === undefined) return "cancelled"
  if (terminal._tag === "Finish") return "success"
  switch (terminal.error._tag) {
    case "RunTimedOut":
      return "timeout"
    case "ToolValidationFailed":
    case "ToolValidationRetryFailed":
      return "tool_validation_error"
    case "RunFailed":
      // A client that stopped reading left, as one that closed its socket did.
      return terminal.error.cause?._tag === "WriteStalled" ? "cancelled" : "error"
    case "NoNodeAccepted":
    case "UpstreamRejected":
      return "error"
  }
}

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

/** When one run was submitted and how long its folds took (this process's own clock: they measure the edge). */
interface Timing {
  readonly submittedAt: number
  processingMs: number
}

export const make = (options: ChatOptions): Effect.Effect<Chat.Service, never, RunService | Metrics> =>
  Effect.gen(function* () {
    const runs = yield* RunService
    const metrics = yield* Metrics

    const report = (
      request: ChatRequest,
      dispatch: RunDispatch,
      session: Session.Session,
      timing: Timing,
      tokens: TokenTiming,
      startedAt: number,
      attempt: number
    ) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const closed = session._tag === "Closed" ? session : undefined
        const terminal = closed?.terminal
        const summary = closed?.summary
        const outcome = outcomeOf(terminal)
        const model = request.submit.model
        const ttftMs = tokens.firstAt === undefined ? undefined : tokens.firstAt - timing.submittedAt
        yield* metrics.run({
          model,
          outcome,
          durationMs: now - startedAt,
          ttftMs,
          interTokenMs: tokens.batches < 2 || tokens.firstAt === undefined
            ? undefined
            : (tokens.lastAt - tokens.firstAt) / (tokens.batches - 1),
          overheadMs: timing.processingMs
        })
        if (summary?.usage !== undefined) yield* metrics.usage({ api: request.api, model, outcome }, summary.usage)
        if (summary !== undefined) yield* metrics.reasoningChars(model, summary.reasoningChars)
        yield* logAnnotated(LogLevel.Info, "run finished", () => ({
          run_id: dispatch.runId,
          node_id: dispatch.nodeId,
          api: request.api,
          model,
          attempt,
          outcome,
          duration_ms: now - startedAt,
          finish_reason: terminal?._tag === "Finish" ? terminal.finishReason : null,
          error: terminal?._tag === "Error" ? terminal.error.message : null,
          error_cause: terminal?._tag === "Error" && terminal.error._tag === "RunFailed"
            ? terminal.error.cause?._tag ?? null
            : null,
          content_chars: summary?.contentChars ?? 0,
          reasoning_chars: summary?.reasoningChars ?? 0,
          tool_calls: summary?.toolCalls ?? 0,
          ttft_ms: ttftMs ?? null,
          overhead_ms: Math.round(timing.processingMs * 1000) / 1000,
          normalized: summary?.normalised ?? false,
          input_tokens: summary?.usage?.inputTokens ?? null,
          output_tokens: summary?.usage?.outputTokens ?? null,
          reasoning_tokens: summary?.usage?.reasoningTokens ?? null,
          cached_tokens: summary?.usage?.cachedInputTokens ?? null
        }))
        if (summary !== undefined) {
          yield* logAnnotated(LogLevel.Debug, "run preview", () => ({
            run_id: dispatch.runId,
            content_preview: summary.contentPreview,
            reasoning_preview: summary.reasoningPreview
          }))
        }
      })

    const traced = (request: ChatRequest) =>
      options.traceStreams && request.submit.metadata["iop_trace_stream"] === "true"

    /** Trace mode: each emission, and each delta that emitted nothing, as a log line with a sequence number. */
    const tracer = (dispatch: RunDispatch) => {
      let seq = 0
      const lines: Array<Effect.Effect<void>> = []
      const line = (message: string, annotations: Record<string, unknown>) =>
        lines.push(Effect.logInfo(message).pipe(Effect.annotateLogs({ run_id: dispatch.runId, ...annotations })))
      return {
        step: (input: Session.SessionInput, out: ReadonlyArray<Session.Emission>) => {
          if (out.length === 0 && (input._tag === "Delta" || input._tag === "ReasoningDelta")) {
            line("stream output suppressed", { seq, type: input._tag, source: input.text })
          }
          for (const e of out) line("stream output chunk", { seq: ++seq, type: e._tag, emission: traceText(e) })
        },
        flush: Effect.suspend(() => Effect.all(lines.splice(0), { discard: true }))
      }
    }

    const openAttempt = (request: ChatRequest, submit: SubmitRunRequest, attempt: number) =>
      Effect.gen(function* () {
        const startedAt = yield* Clock.currentTimeMillis
        const timing: Timing = { submittedAt: performance.now(), processingMs: 0 }
        const handle = yield* runs.submit(submit)
        yield* metrics.runStarted
        let session = Session.initial(sessionConfig(request))
        const trace = traced(request) ? tracer(handle.dispatch) : undefined
        // Registered after the run's own finalizers, so it runs first: the summary is written as the run ends.
        yield* onClose(Effect.suspend(() => report(request, handle.dispatch, session, timing, handle.timing, startedAt, attempt)))

        const fold = (inputs: Iterable<Session.SessionInput>, arrivedAt: number): ReadonlyArray<Session.Emission> => {
          const out: Array<Session.Emission> = []
          for (const input of inputs) {
            const [next, emitted] = Session.step(session, input)
            session = next
            trace?.step(input, emitted)
            for (const e of emitted) out.push(e)
          }
          timing.processingMs += performance.now() - arrivedAt
          return out
        }

        // Trace mode logs every delta as it came; otherwise what arrived together is folded as one text.
        const inputsOf = (events: ReadonlyArray<RunEvent>): ReadonlyArray<Session.SessionInput> =>
          trace === undefined ? Session.coalesce(events) : events
        const foldRead = (read: RunRead): ReadonlyArray<Session.Emission> => {
          const arrivedAt = performance.now()
          if (read._tag === "Failed") return fold([Session.outcome(runOutcome(read.error))], arrivedAt)
          const out = fold(inputsOf(read.events), arrivedAt)
          // Events that ended without a terminal: the session says so (it owns "exactly one terminal").
          return read.done && session._tag === "Open" ? [...out, ...fold([Session.END], arrivedAt)] : out
        }
        // Trace lines are logged on the caller's runtime (its loggers and annotations), also from `poll`.
        const flushTrace = trace === undefined ? undefined : Runtime.runSync(yield* Effect.runtime<never>())
        const poll = (): ReadonlyArray<Session.Emission> | "pending" | "ended" => {
          if (session._tag === "Closed") return "ended"
          const read = handle.read()
          if (read === undefined) return "pending"
          const out = foldRead(read)
          if (flushTrace !== undefined && trace !== undefined) flushTrace(trace.flush)
          return out
        }
        const pull = Effect.map(handle.take, foldRead)
        const step = trace === undefined ? pull : Effect.tap(pull, () => trace.flush)
        const next = Effect.suspend(() => (session._tag === "Closed" ? Effect.succeed(undefined) : step))
        return { dispatch: handle.dispatch, next, poll, onReady: handle.onReadable, onSettled: handle.onSettled } satisfies ChatRun
      })

    const open = (request: ChatRequest) => openAttempt(request, request.submit, 1)

    /**
     * Every emission of a run, collected from the run's own callbacks (`poll` + `onSettled`): one wait for the
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
              if (out === "pending") return run.onSettled(pump)
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
        })
      })

    /** One run, to its terminal, in a scope of its own: its slot is released as soon as it ends. */
    const collectAttempt = (request: ChatRequest, submit: SubmitRunRequest, attempt: number) =>
      Effect.scoped(
        Effect.gen(function* () {
          const run = yield* openAttempt(request, submit, attempt)
          const emissions = yield* drain(run)
          const last = emissions[emissions.length - 1]
          const terminal = last !== undefined && Session.isTerminal(last) ? last : undefined
          // A session always ends with its terminal emission.
          const ended: Session.Terminal = terminal ?? { _tag: "Error", error: new RunFailed({ reason: "run ended without an outcome" }) }
          return { dispatch: run.dispatch, emissions, terminal: ended } satisfies Collected
        })
      )

    const collect = (request: ChatRequest) =>
      Effect.gen(function* () {
        const attempts = request.policy.strict ? options.toolValidationAttempts : 1
        const model = request.submit.model
        let attempt = 1
        let result = yield* collectAttempt(request, request.submit, attempt)
        while (result.terminal._tag === "Error" && result.terminal.error._tag === "ToolValidationFailed") {
          const reason = result.terminal.error.reason
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
            Effect.annotateLogs({ failed_run_id: failedRunId, attempt, reason })
          )
          const replay: SubmitRunRequest = {
            ...request.submit,
            metadata: { ...request.submit.metadata, attempt: String(attempt), failed_run_id: failedRunId, reason }
          }
          const next = yield* Effect.exit(collectAttempt(request, replay, attempt))
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
