import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { layerHttp } from "../../src/Edge.js"

const config = Either.getOrThrow(
  decodeConfigJson("test", { models: [{ id: "echo", provider: { type: "echo", tokenDelayMs: 1 } }] })
)
const EdgeUnderTest = layerHttp.pipe(
  Layer.provide(EdgeConfig.layer(config)),
  Layer.provide(NodeHttpClient.dispatcherLayer),
  Layer.provideMerge(NodeHttpServer.layerTest)
)

/** The value of one exposition line, by its exact series text. */
const value = (text: string, series: string): number | undefined => {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

describe("/metrics after traffic", () => {
  it.scopedLive("counts requests, runs, tokens, latencies, gauges and nodes", () =>
    Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const chat = (body: Record<string, unknown>) =>
        client.execute(
          HttpClientRequest.post("/v1/chat/completions").pipe(
            HttpClientRequest.bodyUnsafeJson({ model: "echo", messages: [{ role: "user", content: "one two three" }], ...body })
          )
        )
      const streamed = yield* chat({ stream: true })
      yield* streamed.text
      const plain = yield* chat({})
      yield* plain.text
      const missing = yield* chat({ model: "nope" })
      expect(missing.status).toBe(404)
      const text = yield* (yield* client.execute(HttpClientRequest.get("/metrics"))).text
      expect(value(text, 'iop_chat_requests_total{api="chat_completions",model="echo",stream="true",outcome="success"}')).toBe(1)
      expect(value(text, 'iop_chat_requests_total{api="chat_completions",model="echo",stream="false",outcome="success"}')).toBe(1)
      expect(value(text, 'iop_runs_total{model="echo",outcome="success"}')).toBe(2)
      expect(value(text, 'iop_tokens_total{api="chat_completions",model="echo",outcome="success",kind="output"}')).toBe(8)
      expect(value(text, 'iop_tokens_total{api="chat_completions",model="echo",outcome="success",kind="input"}')).toBe(8)
      expect(value(text, 'iop_run_duration_seconds_count{model="echo"}')).toBe(2)
      expect(value(text, 'iop_time_to_first_token_seconds_count{model="echo"}')).toBe(2)
      expect(value(text, 'iop_inter_token_latency_seconds_count{model="echo"}')).toBe(2)
      expect(value(text, 'iop_edge_overhead_seconds_count{model="echo"}')).toBe(2)
      expect(value(text, "iop_active_runs")).toBe(0)
      expect(value(text, "iop_active_streams")).toBe(0)
      expect(value(text, 'iop_nodes{state="idle"}')).toBe(1)
      expect(value(text, 'iop_http_responses_total{route="/v1/chat/completions",status="404"}')).toBe(1)
      expect(text).toContain("iop_process_cpu_seconds_total")
      expect(text).toContain("iop_nodejs_eventloop_lag_seconds")
    }).pipe(Effect.provide(EdgeUnderTest))
  )
})

describe("/metrics cardinality", () => {
  /** The number of `iop_http_responses_total` series in an exposition. */
  const httpSeries = (text: string): number => text.split("\n").filter((l) => l.startsWith("iop_http_responses_total{")).length

  it.scopedLive("requests to many distinct unknown paths add no series: they share one `unmatched` route label", () =>
    Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const metricsText = client.execute(HttpClientRequest.get("/metrics")).pipe(Effect.flatMap((r) => r.text))
      const probe = (path: string) => client.execute(HttpClientRequest.get(path)).pipe(Effect.flatMap((r) => r.text))
      yield* probe("/warm-up")
      yield* metricsText
      const before = httpSeries(yield* metricsText)
      yield* Effect.forEach(Array.from({ length: 300 }, (_, i) => i), (i) => probe(`/scan/${i}/admin.php?id=${i}`), {
        concurrency: 16
      })
      yield* probe("/v1/modelz/echo")
      const text = yield* metricsText
      expect(httpSeries(text)).toBe(before)
      expect(value(text, 'iop_http_responses_total{route="unmatched",status="404"}')).toBe(302)
      expect(text).not.toContain("/scan/")
      // Known routes keep their own label, spelled as the router matches them.
      yield* probe("/v1/models?limit=5")
      yield* probe("/V1/Models/")
      yield* probe("/healthz")
      const after = yield* metricsText
      expect(value(after, 'iop_http_responses_total{route="/v1/models",status="200"}')).toBe(2)
      expect(value(after, 'iop_http_responses_total{route="/healthz",status="200"}')).toBe(1)
      expect(httpSeries(after)).toBe(before + 2)
    }).pipe(Effect.provide(EdgeUnderTest))
  )
})
