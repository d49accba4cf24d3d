import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"
import type { Metrics, Outcome } from "../observability/Metrics.js"
import { logAnnotated } from "../observability/Logging.js"
import type { TokenTiming } from "../run/RunChannel.js"
import type { RunDispatch } from "../run/RunHandle.js"
import type { ChatRequest } from "./ChatRequest.js"
import type * as Session from "./session.js"

/** How a response or a run is counted, from its terminal (none: the caller left before it). */
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
    case "UpstreamRejected":
      return "error"
  }
}

/** When one run was submitted and how long its folds took (this process's own clock: they measure the edge). */
export interface FoldTiming {
  readonly submittedAt: number
  processingMs: number
}

export interface RunRecord {
  readonly request: ChatRequest
  readonly dispatch: RunDispatch
  /** The session as the run left it: `Closed` with its terminal and summary, or still open (the caller left). */
  readonly session: Session.Session
  readonly folds: FoldTiming
  readonly tokens: TokenTiming
  readonly startedAt: number
  readonly attempt: number
}

/** The run's one report, written as it ends: its metrics and its summary log line, from the closed session. */
export const report = (metrics: Metrics.Service, run: RunRecord): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { request, dispatch, folds, tokens } = run
    const now = yield* Clock.currentTimeMillis
    const closed = run.session._tag === "Closed" ? run.session : undefined
    const terminal = closed?.terminal
    const summary = closed?.summary
    const outcome = outcomeOf(terminal)
    const model = request.submit.model
    const ttftMs = tokens.firstAt === undefined ? undefined : tokens.firstAt - folds.submittedAt
    yield* metrics.run({
      model,
      outcome,
      durationMs: now - run.startedAt,
      ttftMs,
      interTokenMs: tokens.batches < 2 || tokens.firstAt === undefined
        ? undefined
        : (tokens.lastAt - tokens.firstAt) / (tokens.batches - 1),
      overheadMs: folds.processingMs
    })
    if (summary?.usage !== undefined) yield* metrics.usage({ api: request.api, model, outcome }, summary.usage)
    if (summary !== undefined) yield* metrics.reasoningChars(model, summary.reasoningChars)
    yield* logAnnotated(LogLevel.Info, "run finished", () => ({
      run_id: dispatch.runId,
      node_id: dispatch.nodeId,
      api: request.api,
      model,
      attempt: run.attempt,
      outcome,
      duration_ms: now - run.startedAt,
      finish_reason: terminal?._tag === "Finish" ? terminal.finishReason : null,
      error: terminal?._tag === "Error" ? terminal.error.message : null,
      error_cause: terminal?._tag === "Error" && terminal.error._tag === "RunFailed"
        ? terminal.error.cause?._tag ?? null
        : null,
      content_chars: summary?.contentChars ?? 0,
      reasoning_chars: summary?.reasoningChars ?? 0,
      tool_calls: summary?.toolCalls ?? 0,
      ttft_ms: ttftMs ?? null,
      overhead_ms: Math.round(folds.processingMs * 1000) / 1000,
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
