import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client"
import type { Usage } from "../run/RunEvent.js"

/** Outcome of a response or a run, as counted in `/metrics`. */
export type Outcome = "success" | "error" | "cancelled" | "timeout" | "tool_validation_error"

export declare namespace Metrics {
  export interface Service {
    readonly request: (labels: { model: string; stream: boolean; outcome: Outcome }) => Effect.Effect<void>
    readonly run: (labels: { model: string; outcome: Outcome; durationMs: number }) => Effect.Effect<void>
    readonly usage: (model: string, usage: Usage) => Effect.Effect<void>
    readonly reasoningChars: (model: string, chars: number) => Effect.Effect<void>
    readonly toolValidation: (model: string, result: "retry" | "failure") => Effect.Effect<void>
    readonly streamOpened: Effect.Effect<void>
    readonly streamClosed: Effect.Effect<void>
    readonly httpResponse: (labels: { route: string; status: number }) => Effect.Effect<void>
    /** The Prometheus text exposition and its content type. */
    readonly exposition: Effect.Effect<{ readonly contentType: string; readonly body: string }>
  }
}

export class Metrics extends Context.Tag("@iop/edge/Metrics")<Metrics, Metrics.Service>() {}

export const make = (options: { readonly processMetrics: boolean }): Metrics.Service => {
  const registry = new Registry()
  if (options.processMetrics) collectDefaultMetrics({ register: registry, prefix: "iop_" })
  const requests = new Counter({
    name: "iop_chat_requests_total",
    help: "Chat completion requests by model, stream mode and outcome.",
    labelNames: ["model", "stream", "outcome"],
    registers: [registry]
  })
  const runs = new Counter({
    name: "iop_runs_total",
    help: "Runs (including tool-validation retries) by model and outcome.",
    labelNames: ["model", "outcome"],
    registers: [registry]
  })
  const runDuration = new Histogram({
    name: "iop_run_duration_seconds",
    help: "Run duration from submission to its terminal event.",
    labelNames: ["model"],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [registry]
  })
  const tokens = new Counter({
    name: "iop_tokens_total",
    help: "Tokens reported by providers, by model and kind (input, output, reasoning, cached).",
    labelNames: ["model", "kind"],
    registers: [registry]
  })
  const reasoningChars = new Counter({
    name: "iop_reasoning_characters_total",
    help: "Characters of reasoning produced, by model.",
    labelNames: ["model"],
    registers: [registry]
  })
  const toolValidation = new Counter({
    name: "iop_tool_validation_total",
    help: "Tool-call validation retries and final failures, by model.",
    labelNames: ["model", "result"],
    registers: [registry]
  })
  const activeStreams = new Gauge({
    name: "iop_active_streams",
    help: "SSE responses currently open.",
    registers: [registry]
  })
  const http = new Counter({
    name: "iop_http_responses_total",
    help: "HTTP responses by route and status.",
    labelNames: ["route", "status"],
    registers: [registry]
  })
  return {
    request: ({ model, stream, outcome }) =>
      Effect.sync(() => requests.inc({ model, stream: String(stream), outcome })),
    run: ({ model, outcome, durationMs }) =>
      Effect.sync(() => {
        runs.inc({ model, outcome })
        runDuration.observe({ model }, durationMs / 1000)
      }),
    usage: (model, u) =>
      Effect.sync(() => {
        tokens.inc({ model, kind: "input" }, u.inputTokens)
        tokens.inc({ model, kind: "output" }, u.outputTokens)
        if (u.reasoningTokens !== undefined) tokens.inc({ model, kind: "reasoning" }, u.reasoningTokens)
        if (u.cachedInputTokens !== undefined) tokens.inc({ model, kind: "cached" }, u.cachedInputTokens)
      }),
    reasoningChars: (model, chars) => Effect.sync(() => (chars > 0 ? reasoningChars.inc({ model }, chars) : undefined)),
    toolValidation: (model, result) => Effect.sync(() => toolValidation.inc({ model, result })),
    streamOpened: Effect.sync(() => activeStreams.inc()),
    streamClosed: Effect.sync(() => activeStreams.dec()),
    httpResponse: ({ route, status }) => Effect.sync(() => http.inc({ route, status: String(status) })),
    exposition: Effect.promise(() => registry.metrics()).pipe(
      Effect.map((body) => ({ contentType: registry.contentType, body }))
    )
  }
}

export const MetricsLive: Layer.Layer<Metrics> = Layer.sync(Metrics, () => make({ processMetrics: true }))
/** No process metrics: for tests and for hosts that register their own. */
export const MetricsTest: Layer.Layer<Metrics> = Layer.sync(Metrics, () => make({ processMetrics: false }))
