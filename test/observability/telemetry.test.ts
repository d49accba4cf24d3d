import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Redacted from "effect/Redacted"
import { formatTraceparent, parseTraceparent } from "../../src/common/traceparent.js"
import { parseConfigText } from "../../src/config/loadConfig.js"
import { tracesUrl } from "../../src/observability/Telemetry.js"

const hex = (length: number) =>
  FastCheck.stringMatching(new RegExp(`^[0-9a-f]{${length}}$`)).filter((s) => !/^0+$/.test(s))

const context = FastCheck.record({ traceId: hex(32), spanId: hex(16), sampled: FastCheck.boolean() })

describe("traceparent (W3C Trace Context, version 00)", () => {
  it.prop("what is formatted reads back the same", [context], ([span]) => {
    expect(parseTraceparent(formatTraceparent(span))).toEqual(span)
  })

  it("reads the spec's example; a later version by its first four fields", () => {
    expect(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")).toEqual({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      sampled: true
    })
    expect(parseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-more")).toMatchObject({ sampled: true })
    expect(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")?.sampled).toBe(false)
  })

  it.each([
    ["absent", undefined],
    ["empty", ""],
    ["upper-case hex", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"],
    ["version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
    ["all-zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"],
    ["all-zero span id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"],
    ["a short trace id", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01"],
    ["fields after the flags in version 00", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x"],
    ["too long", `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01${"x".repeat(600)}`]
  ])("names no trace when %s", (_, value) => {
    expect(parseTraceparent(value)).toBeUndefined()
  })

  it.prop("never throws, whatever it is given", [FastCheck.string({ maxLength: 80 })], ([text]) => {
    const read = parseTraceparent(text)
    if (read !== undefined) expect(formatTraceparent(read)).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/)
  })
})

describe("telemetry in the config file", () => {
  const decode = (telemetry: unknown) => parseConfigText("edge.json", JSON.stringify({ telemetry }))

  it("off by default; an endpoint with headers (redacted) and a service name", () => {
    const none = Either.getOrThrow(parseConfigText("edge.json", "{}"))
    expect(none.telemetry).toEqual({})
    const set = Either.getOrThrow(decode({ serviceName: "edge-eu", otlp: { endpoint: "https://otel.example:4318", headers: { "api-key": "s3cret" } } }))
    expect(set.telemetry.serviceName).toBe("edge-eu")
    const key = set.telemetry.otlp?.headers["api-key"]
    expect(key !== undefined && Redacted.value(key)).toBe("s3cret")
    expect(String(key)).not.toContain("s3cret")
    expect(Either.getOrThrow(decode({ otlp: { endpoint: "http://localhost:4318" } })).telemetry.otlp?.headers).toEqual({})
  })

  it("a bad endpoint or an unknown key names the field", () => {
    const message = (telemetry: unknown) => {
      const result = decode(telemetry)
      return Either.isLeft(result) ? result.left.message : "no error"
    }
    expect(message({ otlp: { endpoint: "localhost:4318" } })).toMatch(/\$\.telemetry\.otlp\.endpoint: an http\(s\) URL/)
    expect(message({ otlp: { endpoint: "http://collector:4318/v1/traces?x=1" } })).toMatch(/\$\.telemetry\.otlp\.endpoint/)
    expect(message({ otlp: {} })).toBe("edge.json: $.telemetry.otlp.endpoint: missing (required)")
    expect(message({ otlp: { endpoint: "http://c:4318", protocol: "grpc" } })).toMatch(/\$\.telemetry\.otlp\.protocol: unknown key/)
  })

  it("spans go to {endpoint}/v1/traces, unless the endpoint names that path already", () => {
    expect(tracesUrl("http://collector:4318")).toBe("http://collector:4318/v1/traces")
    expect(tracesUrl("http://collector:4318/")).toBe("http://collector:4318/v1/traces")
    expect(tracesUrl("https://vendor.example/otlp")).toBe("https://vendor.example/otlp/v1/traces")
    expect(tracesUrl("http://collector:4318/v1/traces")).toBe("http://collector:4318/v1/traces")
  })
})
