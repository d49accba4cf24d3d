import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"
import type { Metrics, Outcome, ToolCallsOutcome } from "../observability/Metrics.js"
import type { OutputConstraint } from "../protocol/RunEvent.js"
import { logAnnotated } from "../observability/Logging.js"
import * as Tracing from "../observability/Tracing.js"
import type { TokenTiming } from "../run/RunChannel.js"
import type { RunDispatch } from "../run/RunHandle.js"
import type { ChatRequest } from "./ChatRequest.js"
import * as RunSpans from "./runSpans.js"
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

/** `Complete.metadata.constraint` as a label: what the provider said, or `none` when it said nothing known. */
export const constraintOf = (raw: string | undefined): OutputConstraint =>
  raw === "grammar" || raw === "json_schema" ? raw : "none"

/**
 * How a request's tool calls ended, from the run that settled it (`attempt` of at most `attempts`), or undefined
 * when the request is not counted. Counted once per request whose answer made calls, or owed one (`tool_choice`
 * required or named), or was replayed or refused for its calls: `invalid` when the last attempt failed tool
 * validation, `valid_after_replay` when a replay's answer passed, `valid` when the first did. A run whose
 * validation failed before its last attempt is not the request's end (its replay is); a request that ended
 * otherwise (the run failed, timed out, was cancelled, a replay could not be submitted) is not counted.
 */
export const toolCallsOutcome = (
  request: Pick<ChatRequest, "toolChoice">,
  terminal: Session.Terminal | undefined,
  calls: number,
  attempt: number,
  attempts: number
): ToolCallsOutcome | undefined => {
  if (terminal === undefined) return undefined
  if (terminal._tag === "Error") {
    return terminal.error._tag === "ToolValidationFailed" && attempt >= attempts ? "invalid" : undefined
  }
  if (attempt > 1) return "valid_after_replay"
  const owed = request.toolChoice._tag === "Required" || request.toolChoice._tag === "Function"
  return calls > 0 || owed ? "valid" : undefined
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
  /** The most runs the request may use (its replays included): 1 for a live response. */
  readonly attempts: number
  /** The attempt's span and its run's, when the request is traced. */
  readonly spans?: RunSpans.AttemptSpans | undefined
}

/**
 * The run's one report, written as it ends: its metrics, its summary log line and, when traced, its spans'
 * attributes (the attempt's span ends here), from the closed session.
 */
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
    const error = terminal?._tag === "Error" ? terminal.error : undefined
    const timeout = error?._tag === "RunTimedOut" ? error.bound : undefined
    yield* metrics.run({
      model,
      outcome,
      timeout,
      durationMs: now - run.startedAt,
      ttftMs,
      interTokenMs: tokens.batches < 2 || tokens.firstAt === undefined
        ? undefined
        : (tokens.lastAt - tokens.firstAt) / (tokens.batches - 1),
      overheadMs: folds.processingMs,
      node: {
        id: dispatch.nodeId,
        route: dispatch.route?.reason ?? "only",
        promptTokens: summary?.usage?.inputTokens,
        cachedPromptTokens: summary?.usage?.cachedInputTokens
      }
    })
    if (summary?.usage !== undefined) yield* metrics.usage({ api: request.api, model, outcome }, summary.usage)
    if (summary !== undefined) yield* metrics.reasoningChars(model, summary.reasoningChars)
    const calls = toolCallsOutcome(request, terminal, summary?.toolCalls ?? 0, run.attempt, run.attempts)
    if (calls !== undefined) {
      yield* metrics.toolCalls({ model, outcome: calls, constraint: constraintOf(summary?.constraint) })
    }
    const spans = run.spans
    if (spans !== undefined) {
      RunSpans.recordRun(spans, {
        runId: dispatch.runId,
        nodeId: dispatch.nodeId,
        model,
        attempt: run.attempt,
        outcome,
        finishReason: terminal?._tag === "Finish" ? terminal.finishReason : undefined,
        error: terminal?._tag === "Error" ? terminal.error : undefined,
        usage: summary?.usage,
        toolCalls: summary?.toolCalls ?? 0,
        ttftMs
      })
    }
    yield* logAnnotated(LogLevel.Info, "run finished", () => ({
      // Traced: the line is the attempt span's (the request's trace), for a log search by trace id.
      ...(spans === undefined ? undefined : Tracing.logIds(spans.attempt.span)),
      run_id: dispatch.runId,
      node_id: dispatch.nodeId,
      // Why the run went to its node: the routing reason, the prompt blocks it was sent before, its attempt there.
      route: dispatch.route?.reason ?? null,
      route_blocks: dispatch.route?.matchedBlocks ?? null,
      node_attempt: dispatch.nodeAttempt ?? 1,
      api: request.api,
      model,
      attempt: run.attempt,
      outcome,
      duration_ms: now - run.startedAt,
      finish_reason: terminal?._tag === "Finish" ? terminal.finishReason : null,
      error: error?.message ?? null,
      // What is behind the error: the run plane's reason for a run_error, the bound for a timeout.
      error_cause: error?._tag === "RunFailed" ? error.cause?._tag ?? null : timeout ?? null,
      content_chars: summary?.contentChars ?? 0,
      reasoning_chars: summary?.reasoningChars ?? 0,
      tool_calls: summary?.toolCalls ?? 0,
      constraint: summary?.constraint ?? null,
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
