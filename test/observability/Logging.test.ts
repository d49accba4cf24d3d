import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Logger, Redacted } from "effect"
import { afterEach, vi } from "vitest"
import { clipJsonString, jsonStringBytes } from "../../src/common/clip.js"
import {
  boundedJson,
  boundedJsonLogger,
  formatLogLine,
  layer,
  LOG_CAUSE_BYTES,
  LOG_FIELD_BYTES,
  LOG_LINE_BYTES,
  type LogEntry,
  logEntry
} from "../../src/observability/Logging.js"

const bytes = (text: string) => Buffer.byteLength(text, "utf8")
const MiB = 1024 * 1024
const enumValues = Array.from({ length: 200_000 }, (_, i) => `value-${i}`)
const entry = (overrides: Partial<LogEntry> = {}): LogEntry => ({
  message: "run finished",
  logLevel: "INFO",
  timestamp: "2025-01-01T00:00:00.000Z",
  cause: undefined,
  annotations: [],
  spans: [],
  fiberId: "#1",
  ...overrides
})

/** The lines `layer` writes to stdout while `effect` runs. */
const linesOf = (effect: Effect.Effect<void>) => {
  const lines: Array<string> = []
  const spy = vi.spyOn(console, "log").mockImplementation((line: unknown) => {
    lines.push(String(line))
  })
  return Effect.runPromise(effect.pipe(Effect.provide(layer("debug")))).then(() => {
    spy.mockRestore()
    return lines
  })
}

afterEach(() => {
  vi.restoreAllMocks()
})

describe("clipJsonString", () => {
  it.prop("any text and bound (≥ 2): its JSON takes at most the bound in UTF-8 bytes; a text that fits is kept", [
    fc.string({ unit: "binary", maxLength: 3000 }),
    fc.integer({ min: 2, max: 2000 })
  ], ([text, max]) => {
    const out = clipJsonString(text, max)
    expect(bytes(JSON.stringify(out))).toBeLessThanOrEqual(max)
    expect(jsonStringBytes(out)).toBe(bytes(JSON.stringify(out)))
    if (bytes(JSON.stringify(text)) <= max) expect(out).toBe(text)
    else expect(out).toMatch(/…\(\+\d+ chars\)$|^$|^[^…]*$/u)
  })

  it("clips a 4 MiB string to its start and the count left off", () => {
    expect(clipJsonString("a".repeat(4 * MiB), 64)).toBe(`${"a".repeat(64 - 2 - 19)}…(+${4 * MiB - 43} chars)`)
  })
})

describe("formatLogLine", () => {
  it("a small entry: the JSON line Logger.json prints, with the same fields", () => {
    const line = formatLogLine(entry({ annotations: [["run_id", "r1"], ["attempt", 1], ["error", null]] }))
    expect(JSON.parse(line)).toEqual({
      message: "run finished",
      logLevel: "INFO",
      timestamp: "2025-01-01T00:00:00.000Z",
      annotations: { run_id: "r1", attempt: 1, error: null },
      spans: {},
      fiberId: "#1"
    })
  })

  it.effect("prints what Logger.json prints for ordinary values (objects, errors, causes, spans, redacted)", () =>
    Effect.gen(function* () {
      const options: Array<Logger.Logger.Options<unknown>> = []
      const capture = Logger.replace(Logger.defaultLogger, Logger.make((o) => void options.push(o)))
      const program = Effect.gen(function* () {
        yield* Effect.logInfo("plain")
        yield* Effect.logWarning("two", "parts")
        yield* Effect.logError(new Error("boom"))
        yield* Effect.logError("failed", new Error("inner"))
        yield* Effect.fail("bad").pipe(Effect.tapErrorCause((cause) => Effect.logError("with cause", cause)), Effect.ignore)
      }).pipe(
        Effect.annotateLogs({ request_id: "q", n: 3, obj: { a: [1, "b"] }, key: Redacted.make("sk-secret"), no: undefined }),
        Effect.withLogSpan("request")
      )
      yield* program.pipe(Effect.provide(capture))
      expect(options).toHaveLength(5)
      for (const o of options) {
        const ours = formatLogLine(logEntry(o))
        expect(JSON.parse(ours)).toEqual(JSON.parse(Logger.jsonLogger.log(o)))
        expect(ours).not.toContain("sk-secret")
        expect(boundedJsonLogger.log(o)).toBe(ours)
      }
    }))

  it("huge values (a 4 MiB string, a 200 000-value enum, a long key, a huge cause) keep the line bounded", () => {
    const line = formatLogLine(entry({
      message: ["tool validation failed", "x".repeat(4 * MiB)],
      cause: `Error: ${"c".repeat(MiB)}`,
      annotations: [
        ["reason", `tool "t": ${JSON.stringify(enumValues)}`],
        ["enum", enumValues],
        ["schema", { type: "object", properties: { v: { enum: enumValues } } }],
        ["k".repeat(10_000), 1],
        ["run_id", "r1"]
      ],
      spans: Array.from({ length: 1000 }, (_, i) => [`span-${i}-${"s".repeat(100)}`, i] as const)
    }))
    expect(bytes(line)).toBeLessThanOrEqual(LOG_LINE_BYTES)
    const parsed = JSON.parse(line)
    expect(Object.keys(parsed)).toEqual(["message", "logLevel", "timestamp", "cause", "annotations", "spans", "fiberId"])
    expect(bytes(JSON.stringify(parsed.message))).toBeLessThanOrEqual(LOG_FIELD_BYTES)
    expect(parsed.message).toMatch(/^\["tool validation failed","x+…\(\+\d+ chars\)$/)
    expect(bytes(JSON.stringify(parsed.cause))).toBeLessThanOrEqual(LOG_CAUSE_BYTES)
    expect(parsed.annotations.reason).toMatch(/^tool "t": \["value-0",.*…\(\+\d+ chars\)$/)
    expect(parsed.annotations.enum).toMatch(/^\["value-0","value-1",.*…\(\+\d+ chars\)$/)
    for (const value of Object.values(parsed.annotations)) {
      expect(bytes(JSON.stringify(value))).toBeLessThanOrEqual(LOG_FIELD_BYTES)
    }
    expect(parsed.annotations.run_id ?? parsed.annotations.clipped_annotations).toBeDefined()
  })

  it("many annotations: those past the line's budget are counted, not printed", () => {
    const annotations = Array.from({ length: 10_000 }, (_, i) => [`field_${i}`, "v".repeat(500)] as const)
    const line = formatLogLine(entry({ annotations }))
    expect(bytes(line)).toBeLessThanOrEqual(LOG_LINE_BYTES)
    const parsed = JSON.parse(line)
    expect(parsed.annotations.field_0).toBe("v".repeat(500))
    expect(parsed.annotations.clipped_annotations).toBe(10_000 - Object.keys(parsed.annotations).length + 1)
  })

  const text = fc.string({ unit: "binary", maxLength: 5000, size: "large" })
  const value = fc.oneof(
    fc.anything({ maxDepth: 3 }),
    text,
    fc.array(text, { maxLength: 20 }),
    fc.bigInt(),
    fc.constant(Symbol("s")),
    fc.constant(() => 1)
  )

  it.prop("any message, annotations, cause and spans → one JSON line of at most LOG_LINE_BYTES", [
    fc.oneof(value, fc.array(value, { maxLength: 5 })),
    fc.array(fc.tuple(text, value), { maxLength: 40 }),
    fc.option(text, { nil: undefined }),
    fc.array(fc.tuple(text, fc.double()), { maxLength: 30 }),
    text
  ], ([message, annotations, cause, spans, name]) => {
    const line = formatLogLine(entry({ message, annotations, cause, spans, logLevel: name, timestamp: name, fiberId: name }))
    expect(bytes(line)).toBeLessThanOrEqual(LOG_LINE_BYTES)
    expect(line).not.toContain("\n")
    expect(typeof JSON.parse(line)).toBe("object")
  }, { fastCheck: { numRuns: 200 } })

  it.prop("boundedJson: any value and bound → JSON within the bound (or none)", [
    value,
    fc.integer({ min: 32, max: 3000 })
  ], ([v, max]) => {
    const json = boundedJson(typeof v === "bigint" || typeof v === "symbol" || typeof v === "function" ? String(v) : v, max)
    if (json !== undefined) {
      expect(bytes(json)).toBeLessThanOrEqual(max)
      JSON.parse(json)
    }
  })
})

describe("layer", () => {
  it("a request with huge values logs bounded lines on stdout, in the JSON-line format", async () => {
    const lines = await linesOf(
      Effect.logInfo("tool validation failed", "x".repeat(MiB)).pipe(
        Effect.annotateLogs({ run_id: "r1", reason: "r".repeat(4 * MiB), enum: enumValues })
      )
    )
    expect(lines).toHaveLength(1)
    const [line = ""] = lines
    expect(bytes(line)).toBeLessThanOrEqual(LOG_LINE_BYTES)
    expect(JSON.parse(line)).toMatchObject({ logLevel: "INFO", annotations: { run_id: "r1" }, spans: {} })
  })

  it("keeps the configured level", async () => {
    const lines: Array<string> = []
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void lines.push(String(line)))
    await Effect.runPromise(Effect.all([Effect.logDebug("d"), Effect.logWarning("w")]).pipe(Effect.provide(layer("warn"))))
    expect(lines.map((l) => JSON.parse(l).message)).toEqual(["w"])
  })
})
