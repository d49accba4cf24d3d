import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"

/** `telemetry.otlp`: where the process exports its spans, over OTLP/HTTP (JSON). */
export const OtlpConfig = Schema.Struct({
  /**
   * The collector's OTLP/HTTP base URL (`http://collector:4318`): spans are posted to `{endpoint}/v1/traces`. A URL
   * that already ends in `/v1/traces` is used as it is.
   */
  endpoint: Schema.String.pipe(
    Schema.pattern(/^https?:\/\/[^\s/?#]+[^\s?#]*$/, {
      message: () => "an http(s) URL without a query, e.g. http://localhost:4318"
    })
  ),
  /** Headers sent with every export (a vendor's key, a collector's token), never logged. */
  headers: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.Redacted(Schema.String) }), {
    default: () => ({})
  })
})
export type OtlpConfig = typeof OtlpConfig.Type

/** `telemetry` in the config file: traces off unless `otlp` names a collector. */
export const TelemetryConfig = Schema.Struct({
  /** `service.name` of the exported spans (default: `iop-edge` for `iop edge`, `iop-node` for `iop node`). */
  serviceName: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  otlp: Schema.optional(OtlpConfig)
})
export type TelemetryConfig = typeof TelemetryConfig.Type

/** Where spans are posted for a configured endpoint. */
export const tracesUrl = (endpoint: string): string => {
  const base = endpoint.replace(/\/+$/, "")
  return base.endsWith("/v1/traces") ? base : `${base}/v1/traces`
}

/**
 * The process's tracer when `telemetry.otlp` is set: every span made in the layers it is provided to is exported
 * to the collector over OTLP/HTTP (JSON, batched every 5 s), and what is left is exported when the layer is
 * released (bounded: 3 s). Undefined when telemetry is off.
 */
const layerOtlp = (
  telemetry: TelemetryConfig,
  defaultServiceName: string
): Layer.Layer<never> | undefined => {
  const otlp = telemetry.otlp
  if (otlp === undefined) return undefined
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(otlp.headers)) headers[name] = Redacted.value(value)
  return OtlpTracer.layer({
    url: tracesUrl(otlp.endpoint),
    resource: { serviceName: telemetry.serviceName ?? defaultServiceName },
    headers
  }).pipe(Layer.provide(OtlpSerialization.layerJson), Layer.provide(FetchHttpClient.layer))
}

/**
 * A layer with the config's exporter: `telemetry.otlp` set, the spans made in it are exported (the last of them when
 * it is released); else it is left as it is, in whatever tracer its user provides.
 */
export const provideExporter = (telemetry: TelemetryConfig, defaultServiceName: string) =>
<A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> => {
  const otlp = layerOtlp(telemetry, defaultServiceName)
  return otlp === undefined ? layer : Layer.provide(layer, otlp)
}

/**
 * A process's layer (`iop edge`, `iop node`) with the config's telemetry: `provideExporter`, and with telemetry off,
 * tracing off, so that nothing records spans for nobody.
 */
export const provide = (telemetry: TelemetryConfig, defaultServiceName: string) =>
<A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  telemetry.otlp === undefined
    ? Layer.locally(layer, FiberRef.currentTracerEnabled, false)
    : provideExporter(telemetry, defaultServiceName)(layer)
