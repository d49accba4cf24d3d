import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { collectDefaultMetrics, Registry } from "prom-client"
import * as Dual from "./dualMetric.js"
import type { Api } from "../protocol/Api.js"
import type { RouteLabel } from "./routeLabel.js"
import type { OutputConstraint, Usage } from "../protocol/RunEvent.js"
import type { TimeoutBound } from "../protocol/errors.js"

/** Outcome of a response or a run, as counted in `/metrics`. */
// Types the service's signatures name, beside it.
export type { Api } from "../protocol/Api.js"
export { ROUTES, type Route, type RouteLabel, UNMATCHED } from "./routeLabel.js"

export type Outcome = "success" | "error" | "cancelled" | "timeout" | "tool_validation_error"

/**
 * How a request's tool calls ended, once: valid at the first attempt, valid after replays, or still invalid after
 * its attempts (`iop_tool_calls_total`; which requests count is `runReport.toolCallsOutcome`'s rule).
 */
export type ToolCallsOutcome = "valid" | "valid_after_replay" | "invalid"

export declare namespace Metrics {
  export interface Service {
    readonly request: (labels: { api: Api; model: string; stream: boolean; outcome: Outcome }) => Effect.Effect<void>
    readonly run: (run: {
      readonly model: string
      readonly outcome: Outcome
      readonly durationMs: number
      readonly ttftMs: number | undefined
      readonly interTokenMs: number | undefined
      readonly overheadMs: number
      /** The bound that ended it, when it timed out (outcome `timeout`). */
      readonly timeout?: TimeoutBound | undefined
      /** The node that ran it, why it was routed there, and the prompt tokens it reported (cached ones among them). */
      readonly node?: {
        readonly id: string
        readonly route: string
        readonly promptTokens: number | undefined
        readonly cachedPromptTokens: number | undefined
      }
    }) => Effect.Effect<void>
    readonly runStarted: Effect.Effect<void>
    readonly nodes: (nodes: ReadonlyArray<{
      readonly id: string
      readonly inFlight: number
      readonly maxConcurrentRuns: number
      readonly ejected?: boolean
    }>) => Effect.Effect<void>
    readonly usage: (labels: { api: Api; model: string; outcome: Outcome }, usage: Usage) => Effect.Effect<void>
    readonly reasoningChars: (model: string, chars: number) => Effect.Effect<void>
    /** An assistant turn sent back without its reasoning: put back (matched by a tool call or its text) or not. */
    readonly reasoningContinuity: (model: string, match: "tool_call" | "content" | "miss") => Effect.Effect<void>
    readonly toolValidation: (model: string, result: "retry" | "failure") => Effect.Effect<void>
    /** `constraint`: how the request's last attempt was constrained at its upstream (its `Complete` said so). */
    readonly toolCalls: (labels: {
      readonly model: string
      readonly outcome: ToolCallsOutcome
      readonly constraint: OutputConstraint
    }) => Effect.Effect<void>
    readonly streamOpened: Effect.Effect<void>
    readonly streamClosed: Effect.Effect<void>
    /** `route` is a route template (`routeLabel`), never a raw path: the series set stays bounded. */
    readonly httpResponse: (labels: { route: RouteLabel; status: number }) => Effect.Effect<void>
    /** The Prometheus text exposition and its content type. */
    readonly exposition: Effect.Effect<{ readonly contentType: string; readonly body: string }>
  }
}

export class Metrics extends Context.Tag("@iop/edge/Metrics")<Metrics, Metrics.Service>() {}

export const make = (options: { readonly processMetrics: boolean }): Metrics.Service => {
  const registry = new Registry()
  if (options.processMetrics) collectDefaultMetrics({ register: registry, prefix: "iop_" })
  const requests = Dual.counter(registry, {
    name: "iop_chat_requests_total",
    help: "Requests by API (chat_completions, responses, messages), model, stream mode and outcome.",
    labelNames: ["api", "model", "stream", "outcome"] as const
  })
  const runs = Dual.counter(registry, {
    name: "iop_runs_total",
    help: "Runs (including tool-validation retries) by model and outcome.",
    labelNames: ["model", "outcome"] as const
  })
  const runTimeouts = Dual.counter(registry, {
    name: "iop_run_timeouts_total",
    help: "Runs that timed out, by model and bound (idle, first_token, max_run).",
    labelNames: ["model", "bound"] as const
  })
  const runDuration = Dual.histogram(registry, {
    name: "iop_run_duration_seconds",
    help: "Run duration from submission to its terminal event.",
    labelNames: ["model"] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]
  })
  const ttft = Dual.histogram(registry, {
    name: "iop_time_to_first_token_seconds",
    help: "Time from dispatch to the run's first content or reasoning event.",
    labelNames: ["model"] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
  })
  const interToken = Dual.histogram(registry, {
    name: "iop_inter_token_latency_seconds",
    help: "Mean time between a run's token events after the first, one sample per run.",
    labelNames: ["model"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]
  })
  const overhead = Dual.histogram(registry, {
    name: "iop_edge_overhead_seconds",
    help: "Edge time per run: request to dispatch, plus turning node events into response chunks.",
    labelNames: ["model"] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1]
  })
  const activeRuns = Dual.gauge(registry, { name: "iop_active_runs", help: "Runs in progress." })
  const nodes = Dual.gauge(registry, {
    name: "iop_nodes",
    help: "Registered nodes by state (idle, busy, full).",
    labelNames: ["state"] as const
  })
  const nodeRuns = Dual.counter(registry, {
    name: "iop_node_runs_total",
    help: "Runs by model, the node that ran them and why they were routed there (affinity, spill, no_match, only, " +
      "least_busy, round_robin).",
    labelNames: ["model", "node", "route"] as const
  })
  const nodePrompt = Dual.counter(registry, {
    name: "iop_node_prompt_tokens_total",
    help: "Prompt tokens the node's upstream reported, by model and node (cached ones included).",
    labelNames: ["model", "node"] as const
  })
  const nodeCached = Dual.counter(registry, {
    name: "iop_node_cached_prompt_tokens_total",
    help: "Prompt tokens the node's upstream answered from its cache (llama.cpp's cache_n, OpenAI's cached_tokens), " +
      "by model and node: over iop_node_prompt_tokens_total, the cache hit ratio.",
    labelNames: ["model", "node"] as const
  })
  const nodeEjected = Dual.gauge(registry, {
    name: "iop_node_ejected",
    help: "1 while a node is ejected by its health (its upstream unreachable or failing), by node.",
    labelNames: ["node"] as const
  })
  const tokens = Dual.counter(registry, {
    name: "iop_tokens_total",
    help: "Tokens reported by providers, by API, model, run outcome and kind (input, output, reasoning, cached).",
    labelNames: ["api", "model", "outcome", "kind"] as const
  })
  const reasoningChars = Dual.counter(registry, {
    name: "iop_reasoning_characters_total",
    help: "Characters of reasoning produced, by model.",
    labelNames: ["model"] as const
  })
  const continuity = Dual.counter(registry, {
    name: "iop_reasoning_continuity_total",
    help: "Assistant turns sent back without their reasoning, for models with reasoning continuity, by model and " +
      "match (tool_call, content: put back; miss: none remembered).",
    labelNames: ["model", "match"] as const
  })
  const toolValidation = Dual.counter(registry, {
    name: "iop_tool_validation_total",
    help: "Tool-call validation retries and final failures, by model.",
    labelNames: ["model", "result"] as const
  })
  const toolCalls = Dual.counter(registry, {
    name: "iop_tool_calls_total",
    help: "Requests whose answer made or owed tool calls, once each, by model, outcome (valid, valid_after_replay, " +
      "invalid) and how the last attempt was constrained (grammar, json_schema, none).",
    labelNames: ["model", "outcome", "constraint"] as const
  })
  const activeStreams = Dual.gauge(registry, {
    name: "iop_active_streams",
    help: "SSE responses currently open."
  })
  const http = Dual.counter(registry, {
    name: "iop_http_responses_total",
    help: "HTTP responses by route and status.",
    labelNames: ["route", "status"] as const
  })
  return {
    request: ({ api, model, stream, outcome }) =>
      Effect.sync(() => requests.inc({ api, model, stream: String(stream), outcome })),
    run: (r) =>
      Effect.sync(() => {
        activeRuns.add({}, -1)
        runs.inc({ model: r.model, outcome: r.outcome })
        if (r.timeout !== undefined) runTimeouts.inc({ model: r.model, bound: r.timeout })
        runDuration.observe({ model: r.model }, r.durationMs / 1000)
        if (r.ttftMs !== undefined) ttft.observe({ model: r.model }, r.ttftMs / 1000)
        if (r.interTokenMs !== undefined) interToken.observe({ model: r.model }, r.interTokenMs / 1000)
        overhead.observe({ model: r.model }, r.overheadMs / 1000)
        const node = r.node
        if (node === undefined) return
        const labels = { model: r.model, node: node.id }
        nodeRuns.inc({ ...labels, route: node.route })
        if (node.promptTokens !== undefined) nodePrompt.inc(labels, node.promptTokens)
        if (node.cachedPromptTokens !== undefined) nodeCached.inc(labels, node.cachedPromptTokens)
      }),
    runStarted: Effect.sync(() => activeRuns.add({}, 1)),
    nodes: (list) =>
      Effect.sync(() => {
        const count = { idle: 0, busy: 0, full: 0 }
        for (const n of list) count[n.inFlight === 0 ? "idle" : n.inFlight >= n.maxConcurrentRuns ? "full" : "busy"] += 1
        for (const [state, value] of Object.entries(count)) nodes.set({ state }, value)
        // Only the nodes registered now: one that left has no series.
        nodeEjected.reset()
        for (const n of list) nodeEjected.set({ node: n.id }, n.ejected === true ? 1 : 0)
      }),
    usage: (labels, u) =>
      Effect.sync(() => {
        tokens.inc({ ...labels, kind: "input" }, u.inputTokens)
        tokens.inc({ ...labels, kind: "output" }, u.outputTokens)
        if (u.reasoningTokens !== undefined) tokens.inc({ ...labels, kind: "reasoning" }, u.reasoningTokens)
        if (u.cachedInputTokens !== undefined) tokens.inc({ ...labels, kind: "cached" }, u.cachedInputTokens)
      }),
    reasoningChars: (model, chars) => Effect.sync(() => (chars > 0 ? reasoningChars.inc({ model }, chars) : undefined)),
    reasoningContinuity: (model, match) => Effect.sync(() => continuity.inc({ model, match })),
    toolValidation: (model, result) => Effect.sync(() => toolValidation.inc({ model, result })),
    toolCalls: ({ model, outcome, constraint }) => Effect.sync(() => toolCalls.inc({ model, outcome, constraint })),
    streamOpened: Effect.sync(() => activeStreams.add({}, 1)),
    streamClosed: Effect.sync(() => activeStreams.add({}, -1)),
    httpResponse: ({ route, status }) => Effect.sync(() => http.inc({ route, status: String(status) })),
    exposition: Effect.promise(() => registry.metrics()).pipe(
      Effect.map((body) => ({ contentType: registry.contentType, body }))
    )
  }
}

export const layer: Layer.Layer<Metrics> = Layer.sync(Metrics, () => make({ processMetrics: true }))
/** No process metrics: for tests and for hosts that register their own. */
export const layerTest: Layer.Layer<Metrics> = Layer.sync(Metrics, () => make({ processMetrics: false }))
