import type * as Fiber from "effect/Fiber"
import type { Outcome } from "../observability/Metrics.js"
import * as Tracing from "../observability/Tracing.js"
import type { Usage } from "../protocol/RunEvent.js"
import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"
import type { ChatRequest } from "./ChatRequest.js"

/**
 * A chat request's spans, after the OpenTelemetry GenAI conventions: the run span `chat {model}` (an inference,
 * CLIENT, over every attempt: strict replays included) and one `iop.attempt` span per run submitted, a child of it,
 * whose trace context the node and its upstream continue. Their attributes are set once, when the run settles, from
 * its report (`runReport.ts`): nothing per token.
 */

/**
 * `gen_ai.provider.name`: what the edge calls is an iop node, whatever serves the model behind it (an upstream the
 * edge does not see across the bus).
 */
export const GEN_AI_PROVIDER = "iop"

/** The run span, and what the last of its attempts found (the one that settles the request), for its end. */
export interface RunSpan {
  readonly span: Tracing.EdgeSpan
  last: RunFindings | undefined
}

/** An attempt's span and the run span it belongs to. */
export interface AttemptSpans {
  readonly run: RunSpan
  readonly attempt: Tracing.EdgeSpan
}

const stopSequences = (stop: string | ReadonlyArray<string> | undefined): ReadonlyArray<string> | undefined =>
  stop === undefined ? undefined : typeof stop === "string" ? [stop] : stop

/**
 * The request's run span, in the caller's span (the request's: HTTP or a typed call), or undefined when the fiber
 * does not trace.
 */
export const beginRun = (
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  request: ChatRequest,
  stream: boolean
): RunSpan | undefined => {
  const model = request.submit.model
  const run = Tracing.begin(fiber, `chat ${model}`, "client", Tracing.currentSpan(fiber))
  if (run === undefined) return undefined
  const sampling = request.submit.sampling
  Tracing.annotate(run.span, {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": GEN_AI_PROVIDER,
    // The name before `gen_ai.provider.name` (semantic conventions 1.36 and older), still what many backends read.
    "gen_ai.system": GEN_AI_PROVIDER,
    "gen_ai.request.model": model,
    "gen_ai.request.max_tokens": sampling.maxTokens,
    "gen_ai.request.temperature": sampling.temperature,
    "gen_ai.request.top_p": sampling.topP,
    "gen_ai.request.seed": sampling.seed,
    "gen_ai.request.frequency_penalty": sampling.frequencyPenalty,
    "gen_ai.request.presence_penalty": sampling.presencePenalty,
    "gen_ai.request.stop_sequences": stopSequences(sampling.stop),
    "iop.api": request.api,
    "iop.stream": stream
  })
  return { span: run, last: undefined }
}

/** One attempt's span: its number and, for a replay, the run it replays and why. */
export const beginAttempt = (run: RunSpan, attempt: number, submit: SubmitRunRequest): AttemptSpans => {
  const span = Tracing.child(run.span, "iop.attempt", "internal")
  Tracing.annotate(span.span, {
    "iop.attempt": attempt,
    "iop.failed_run_id": submit.metadata["failed_run_id"],
    "iop.reason": submit.metadata["reason"],
    "iop.replay_tool": submit.replayTool
  })
  return { run, attempt: span }
}

/** The submission of an attempt: its span is the trace context the node and the upstream continue. */
export const carrying = (submit: SubmitRunRequest, spans: AttemptSpans): SubmitRunRequest => ({
  ...submit,
  traceparent: Tracing.traceparentOf(spans.attempt.span)
})

/** An error as a span's status takes it. */
export interface SpanError {
  readonly _tag: string
  readonly message: string
}

/** What a run's report found, for its spans. */
export interface RunFindings {
  readonly runId: string
  readonly nodeId: string
  readonly model: string
  readonly attempt: number
  readonly outcome: Outcome
  readonly finishReason: string | undefined
  /** The run's error, when it ended with one. */
  readonly error: SpanError | undefined
  readonly usage: Usage | undefined
  readonly toolCalls: number
  readonly ttftMs: number | undefined
}

const failing = (outcome: Outcome): boolean => outcome !== "success" && outcome !== "cancelled"

const toError = (error: SpanError): Error => (error instanceof Error ? error : new Error(error.message))

/** The response attributes of a run (GenAI's and the edge's own). */
const findings = (found: RunFindings): Record<string, unknown> => ({
  "gen_ai.response.id": found.runId,
  "gen_ai.response.model": found.model,
  "gen_ai.response.finish_reasons": found.finishReason === undefined ? undefined : [found.finishReason],
  "gen_ai.usage.input_tokens": found.usage?.inputTokens,
  "gen_ai.usage.output_tokens": found.usage?.outputTokens,
  "gen_ai.usage.reasoning.output_tokens": found.usage?.reasoningTokens,
  "gen_ai.usage.cache_read.input_tokens": found.usage?.cachedInputTokens,
  "iop.run_id": found.runId,
  "iop.node": found.nodeId,
  "iop.attempt": found.attempt,
  "iop.tool_calls": found.toolCalls,
  "iop.ttft_ms": found.ttftMs === undefined ? undefined : Math.round(found.ttftMs * 1000) / 1000
})

/**
 * A settled run: its findings on the attempt's span, which ends; the run span keeps them for its own end (the last
 * attempt's are the request's).
 */
export const recordRun = (spans: AttemptSpans, found: RunFindings): void => {
  const failed = found.error !== undefined && failing(found.outcome) ? found.error : undefined
  Tracing.annotate(spans.attempt.span, {
    ...findings(found),
    "iop.outcome": found.outcome,
    "error.type": failed?._tag
  })
  Tracing.end(spans.attempt, failed === undefined ? undefined : toError(failed))
  spans.run.last = found
}

/** An attempt that was never run: its submission failed (`error`), or the caller left while it was submitted. */
export const attemptNotRun = (spans: AttemptSpans, error: SpanError | undefined): void => {
  Tracing.annotate(spans.attempt.span, { "iop.outcome": error === undefined ? "cancelled" : "error", "error.type": error?._tag })
  Tracing.end(spans.attempt, error === undefined ? undefined : toError(error))
}

/**
 * The run span's end, with the response's outcome and the last attempt's findings; `error` when it failed (a
 * run's, or a submission's that prevented any run).
 */
export const endRun = (run: RunSpan, outcome: Outcome, error: SpanError | undefined): void => {
  const failed = error !== undefined && failing(outcome) ? error : undefined
  Tracing.annotate(run.span.span, {
    ...(run.last === undefined ? {} : findings(run.last)),
    "iop.outcome": outcome,
    "error.type": failed?._tag
  })
  Tracing.end(run.span, failed === undefined ? undefined : toError(failed))
}
