import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Logger, Redacted } from "effect"
import { afterEach, vi } from "vitest"
import { clipJsonString, jsonStringBytes } from "../../src/common/clip.js"
import {
  boundedJson,
  boundedJsonLogger,
  chooseFormat,
  formatLogLine,
  formatPrettyLine,
  layer,
  LOG_ANNOTATIONS_BYTES,
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
  return Effect.runPromise(effect.pipe(Effect.provide(layer({ level: "debug", format: "json" })))).then(() => {
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
    await Effect.runPromise(Effect.all([Effect.logDebug("d"), Effect.logWarning("w")]).pipe(Effect.provide(layer({ level: "warn", format: "auto" }))))
    expect(lines.map((l) => JSON.parse(l).message)).toEqual(["w"])
  })
})

describe("log.format", () => {
  it("auto is pretty on a terminal and JSON anywhere else; pretty and json are what they say", () => {
    expect([chooseFormat("auto", true), chooseFormat("auto", false)]).toEqual(["pretty", "json"])
    expect([chooseFormat("json", true), chooseFormat("json", false)]).toEqual(["json", "json"])
    expect([chooseFormat("pretty", true), chooseFormat("pretty", false)]).toEqual(["pretty", "pretty"])
  })

  /** The lines the layer writes for `log` and `output` (the terminal flag is given, never read from stdout). */
  const written = async (log: Parameters<typeof layer>[0], output: Parameters<typeof layer>[1]) => {
    const lines: Array<string> = []
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void lines.push(String(line)))
    await Effect.runPromise(
      Effect.logInfo("http request").pipe(
        Effect.annotateLogs({ method: "POST", path: "/v1/chat/completions", status: 200 }),
        Effect.provide(layer(log, output))
      )
    )
    vi.restoreAllMocks()
    return lines
  }

  it("the layer: on a terminal `auto` writes readable lines (coloured when asked), elsewhere JSON lines", async () => {
    const [pretty = ""] = await written({ level: "info", format: "auto" }, { isTTY: true, colors: false })
    expect(pretty).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  http request( \w+=\S+){3}$/)
    expect(pretty.split(" ").slice(5).sort()).toEqual(["method=POST", "path=/v1/chat/completions", "status=200"])
    const [coloured = ""] = await written({ level: "info", format: "auto" }, { isTTY: true, colors: true })
    expect(coloured).toMatch(/^\x1b\[2m\d\d:\d\d:\d\d\.\d{3}\x1b\[0m \x1b\[32mINFO \x1b\[0m http request /)
    expect(coloured.replace(/\x1b\[\d+m/g, "").split(" ").slice(1)).toEqual(pretty.split(" ").slice(1))
    const [json = ""] = await written({ level: "info", format: "auto" }, { isTTY: false, colors: false })
    expect(JSON.parse(json)).toMatchObject({ message: "http request", annotations: { method: "POST", status: 200 } })
    const [forcedJson = ""] = await written({ level: "info", format: "json" }, { isTTY: true, colors: true })
    expect(JSON.parse(forcedJson).message).toBe("http request")
    const [forcedPretty = ""] = await written({ level: "info", format: "pretty" }, { isTTY: false, colors: false })
    expect(forcedPretty).toMatch(/ INFO  http request .*method=POST/)
    expect(forcedPretty).not.toContain("\x1b")
    // Without a terminal flag, the layer writes JSON.
    const [plain = ""] = await written({ level: "info", format: "auto" }, undefined)
    expect(JSON.parse(plain).message).toBe("http request")
  })
})

describe("formatPrettyLine", () => {
  const at = "2025-01-01T12:34:56.789Z"
  const local = (iso: string) => {
    const d = new Date(iso)
    const two = (n: number) => String(n).padStart(2, "0")
    return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, "0")}`
  }

  it("the run's summary: one line, `time LEVEL message key=value` (leading fields, then by name), nulls left out, values with spaces quoted", () => {
    const line = formatPrettyLine(entry({
      timestamp: at,
      annotations: [
        ["run_id", "run_x1"],
        ["model", "qwen3:8b"],
        ["outcome", "timeout"],
        ["duration_ms", 10_003],
        ["ttft_ms", 9.113029000000097],
        ["finish_reason", null],
        ["error", "run timed out: no output within 10000 ms"],
        ["error_cause", "first_token"],
        ["normalized", false],
        ["request_id", "req-1"]
      ]
    }), false)
    expect(line).toBe(
      `${local(at)} INFO  run finished model=qwen3:8b outcome=timeout duration_ms=10003 ` +
        `error="run timed out: no output within 10000 ms" error_cause=first_token normalized=false request_id=req-1 run_id=run_x1 ttft_ms=9.113`
    )
  })

  it("secrets stay redacted; objects are their JSON; spans are label=Nms; a cause follows on indented lines", () => {
    const line = formatPrettyLine(entry({
      timestamp: at,
      logLevel: "ERROR",
      message: ["stream failed", "with a defect"],
      annotations: [["key", Redacted.make("sk-secret")], ["tools", { names: ["a b", "c"] }]],
      spans: [["request", 12]],
      cause: "Error: boom\n    at f (x.ts:1)\r\n\x1b[31mred"
    }), false)
    expect(line).not.toContain("sk-secret")
    expect(line.split("\n")).toEqual([
      `${local(at)} ERROR stream failed with a defect key=<redacted> tools={"names":["a b","c"]} request=12ms`,
      "  Error: boom",
      "      at f (x.ts:1)",
      "  \ufffd[31mred"
    ])
  })

  it("what a request carries cannot break the line or drive the terminal: quoted, escaped, replaced", () => {
    const line = formatPrettyLine(entry({
      timestamp: at,
      message: "model said\nINFO  forged line",
      annotations: [["path", "/v1/x\n12:00:00.000 INFO  forged"], ["esc", "\x1b[2J"], ["c1", "a\u009bb"], ["k e=y", 1]]
    }), false)
    expect(line).not.toContain("\n")
    expect(line).not.toContain("\x1b")
    expect(line).not.toMatch(/[\u007f-\u009f\u2028\u2029]/)
    expect(line).toContain(`INFO  "model said\\nINFO  forged line" path="/v1/x\\n12:00:00.000 INFO  forged"`)
    expect(line).toContain(`"k e=y"=1`)
  })

  it("huge values keep the event bounded; the annotations past the budget are counted", () => {
    const line = formatPrettyLine(entry({
      message: ["tool validation failed", "x".repeat(4 * MiB)],
      cause: `Error: ${"c\n".repeat(MiB)}`,
      annotations: [
        ["reason", `tool "t": ${JSON.stringify(enumValues)}`],
        ["enum", enumValues],
        ...Array.from({ length: 1000 }, (_, i) => [`field_${i}`, "v".repeat(500)] as const)
      ],
      spans: Array.from({ length: 1000 }, (_, i) => [`span-${i}-${"s".repeat(100)}`, i] as const)
    }), true)
    expect(bytes(line)).toBeLessThanOrEqual(LOG_LINE_BYTES)
    const [first = ""] = line.split("\n")
    expect(bytes(first)).toBeLessThanOrEqual(LOG_FIELD_BYTES + LOG_ANNOTATIONS_BYTES + 1024)
    expect(first).toMatch(/ clipped_annotations=\d+/)
    expect(bytes(line.slice(first.length + 1))).toBeLessThanOrEqual(LOG_CAUSE_BYTES)
  })

  const text = fc.string({ unit: "binary", maxLength: 3000, size: "large" })
  const value = fc.oneof(fc.anything({ maxDepth: 3 }), text, fc.array(text, { maxLength: 20 }), fc.bigInt())

  it.prop("any entry → at most LOG_LINE_BYTES; only a cause breaks the line, each of its lines indented; no terminal controls", [
    fc.oneof(value, fc.array(value, { maxLength: 5 })),
    fc.array(fc.tuple(text, value), { maxLength: 40 }),
    fc.option(text, { nil: undefined }),
    fc.array(fc.tuple(text, fc.double()), { maxLength: 30 }),
    text
  ], ([message, annotations, cause, spans, name]) => {
    const line = formatPrettyLine(entry({ message, annotations, cause, spans, logLevel: name, timestamp: name }), false)
    expect(bytes(line)).toBeLessThanOrEqual(LOG_LINE_BYTES)
    const [first = "", ...causeLines] = line.split("\n")
    expect(first).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/)
    if (cause === undefined) expect(causeLines).toHaveLength(0)
    for (const l of causeLines) {
      expect(l.startsWith("  ")).toBe(true)
      // A tab of a stack trace stays; nothing else a terminal acts on does.
      expect(l).not.toMatch(/[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u2028\u2029]/)
    }
  }, { fastCheck: { numRuns: 200 } })
})
