import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import * as MetricState from "effect/MetricState"
import { Metrics, layerTest } from "../../src/observability/Metrics.js"

/** The Effect metric of `name` whose tags are exactly `tags` (any order), from Effect's global registry. */
const seriesOf = (name: string, tags: Readonly<Record<string, string>>) =>
  Effect.map(Metric.snapshot, (pairs) =>
    pairs.find((p) => {
      if (p.metricKey.name !== name) return false
      const own = Object.fromEntries(p.metricKey.tags.map((t) => [t.key, t.value]))
      return Object.keys(own).length === Object.keys(tags).length && Object.entries(tags).every(([k, v]) => own[k] === v)
    })?.metricState)

describe("metrics as Effect Metrics", () => {
  it.effect("every update reaches Effect's registry under the same name and labels as /metrics", () =>
    Effect.gen(function* () {
      const metrics = yield* Metrics
      const model = `effect-metrics-${Math.random().toString(36).slice(2)}`
      yield* metrics.request({ api: "responses", model, stream: true, outcome: "success" })
      yield* metrics.request({ api: "responses", model, stream: true, outcome: "success" })
      yield* metrics.runStarted
      yield* metrics.run({ model, outcome: "success", durationMs: 1500, ttftMs: 20, interTokenMs: 5, overheadMs: 1 })
      yield* metrics.toolCalls({ model, outcome: "valid_after_replay", constraint: "grammar" })
      const requests = yield* seriesOf("iop_chat_requests_total", { api: "responses", model, stream: "true", outcome: "success" })
      expect(requests !== undefined && MetricState.isCounterState(requests) ? requests.count : undefined).toBe(2)
      const duration = yield* seriesOf("iop_run_duration_seconds", { model })
      expect(duration !== undefined && MetricState.isHistogramState(duration) ? [duration.count, duration.sum] : undefined).toEqual([1, 1.5])
      const calls = yield* seriesOf("iop_tool_calls_total", { model, outcome: "valid_after_replay", constraint: "grammar" })
      expect(calls !== undefined && MetricState.isCounterState(calls) ? calls.count : undefined).toBe(1)
      // The same figures in the Prometheus text.
      const { body } = yield* metrics.exposition
      expect(body).toContain(`iop_chat_requests_total{api="responses",model="${model}",stream="true",outcome="success"} 2`)
    }).pipe(Effect.provide(layerTest)))
})
