import * as Schema from "effect/Schema"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as FiberId from "effect/FiberId"
import * as HashMap from "effect/HashMap"
import * as Inspectable from "effect/Inspectable"
import * as Layer from "effect/Layer"
import * as List from "effect/List"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import { clipJsonString, utf8Bytes } from "../common/clip.js"

/** `log` in the config file. */
export const LogConfig = Schema.Struct({
  level: Schema.optionalWith(Schema.Literal("debug", "info", "warn", "error", "none"), {
    default: () => "info" as const
  }),
  /** Honour `metadata.iop_trace_stream: "true"`: log every emitted chunk and suppressed delta of that request. */
  traceStreams: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** `pretty`: one readable line per event; `json`: one JSON object per line; `auto`: pretty on a terminal, else JSON. */
  format: Schema.optionalWith(Schema.Literal("auto", "pretty", "json"), { default: () => "auto" as const })
})
export type LogConfig = typeof LogConfig.Type

/** What `log.format` means where the lines go: `auto` is pretty when stdout is a terminal, JSON otherwise. PURE. */
export const chooseFormat = (format: LogConfig["format"], stdoutIsTTY: boolean): "pretty" | "json" =>
  format === "auto" ? (stdoutIsTTY ? "pretty" : "json") : format


/** The Effect log level of a configured `log.level`. */
export const levels: Record<LogConfig["level"], LogLevel.LogLevel> = {
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  error: LogLevel.Error,
  none: LogLevel.None
}

/**
 * A log line with annotations, built only when `level` is logged: `annotateLogs` costs a FiberRef swap (an
 * acquire/release) and the annotations an object per line, which a per-request line (the access log, the run's
 * summary) must not cost at a level that drops it.
 */
export const logAnnotated = (
  level: LogLevel.LogLevel,
  message: string,
  annotations: () => Record<string, unknown>
): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) =>
    LogLevel.lessThan(level, fiber.getFiberRef(FiberRef.currentMinimumLogLevel))
      ? Effect.void
      : Effect.logWithLevel(level, message).pipe(Effect.annotateLogs(annotations()))
  )

/**
 * Sets the current fiber's minimum log level for the rest of it, unless it is that already: a FiberRef set
 * copies all of the fiber's FiberRefs, and every request sets it (the server's runtime usually has it already).
 */
export const setFiberLogLevel = (level: LogLevel.LogLevel): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) =>
    fiber.getFiberRef(FiberRef.currentMinimumLogLevel) === level
      ? Effect.void
      : FiberRef.set(FiberRef.currentMinimumLogLevel, level)
  )

/** The message, and each annotation value, takes at most this many bytes of JSON. */
export const LOG_FIELD_BYTES = 1024
/** All annotations of a line together (keys, values and separators). */
export const LOG_ANNOTATIONS_BYTES = 4 * 1024
/** The pretty-printed cause of a line, if any. */
export const LOG_CAUSE_BYTES = 2 * 1024
/** All log spans of a line together. */
export const LOG_SPANS_BYTES = 512
/** The level, timestamp, fiber id, and each annotation key or span label. */
export const LOG_NAME_BYTES = 64
/** No line is longer than this (UTF-8 bytes, newline excluded), whatever its values hold. */
export const LOG_LINE_BYTES = 8 * 1024

/** One log entry as plain data: what `Logger.json` prints, before bounds. */
export interface LogEntry {
  readonly message: unknown
  readonly logLevel: string
  readonly timestamp: string
  readonly cause: string | undefined
  readonly annotations: ReadonlyArray<readonly [string, unknown]>
  readonly spans: ReadonlyArray<readonly [string, number]>
  readonly fiberId: string
}

/** As `Logger.structuredLogger` reads a value. */
const structured = (u: unknown): unknown =>
  typeof u === "bigint" || typeof u === "function" || typeof u === "symbol" ? String(u) : Inspectable.toJSON(u)

/** As `Logger.jsonLogger` prints an error message. */
const errorJson = (u: unknown): unknown =>
  u instanceof Error && !("toJSON" in u) ? { ...u, name: u.name, message: u.message } : u

const serialised = (value: unknown): string | undefined => {
  try {
    return Inspectable.stringifyCircular(value)
  } catch {
    return JSON.stringify(String(value))
  }
}

/**
 * The JSON of a value in at most `maxBytes` bytes (`maxBytes` ≥ 32), or undefined when it has none (as
 * `JSON.stringify` leaves it out). A string is clipped with a `…(+N chars)` marker; an array or object that does
 * not fit becomes its JSON text, clipped, as a string.
 */
export const boundedJson = (value: unknown, maxBytes: number): string | undefined => {
  if (typeof value === "string") return JSON.stringify(clipJsonString(value, maxBytes))
  const text = serialised(value)
  if (text === undefined) return undefined
  // A JSON text longer in code units than the bound is longer in bytes too.
  if (text.length <= maxBytes && utf8Bytes(text) <= maxBytes) return text
  return JSON.stringify(clipJsonString(text, maxBytes))
}

const name = (text: string): string => JSON.stringify(clipJsonString(text, LOG_NAME_BYTES))

/** The annotations of a line in `LOG_ANNOTATIONS_BYTES`; those that do not fit are counted as `clipped_annotations`. */
const annotationsJson = (annotations: ReadonlyArray<readonly [string, unknown]>): string => {
  // Room for `,"clipped_annotations":<count>`.
  const reserve = 48
  const parts: Array<string> = []
  let used = 2
  let clipped = 0
  for (const [key, value] of annotations) {
    const k = name(key)
    const room = Math.min(LOG_FIELD_BYTES, LOG_ANNOTATIONS_BYTES - reserve - used - utf8Bytes(k) - 2)
    const v = room < 32 ? undefined : boundedJson(structured(value), room)
    if (room < 32 || (v !== undefined && utf8Bytes(v) > room)) {
      clipped++
      continue
    }
    if (v === undefined) continue
    const part = `${k}:${v}`
    used += utf8Bytes(part) + 1
    parts.push(part)
  }
  if (clipped > 0) parts.push(`"clipped_annotations":${clipped}`)
  return `{${parts.join(",")}}`
}

/** The spans of a line in `LOG_SPANS_BYTES` (a repeated label keeps its first place and its last value). */
const spansJson = (spans: ReadonlyArray<readonly [string, number]>): string => {
  const byLabel = new Map<string, number>()
  for (const [label, ms] of spans) byLabel.set(name(label), ms)
  const parts: Array<string> = []
  let used = 2
  for (const [label, ms] of byLabel) {
    const part = `${label}:${JSON.stringify(Number.isFinite(ms) ? ms : null)}`
    if (used + utf8Bytes(part) + 1 > LOG_SPANS_BYTES) break
    used += utf8Bytes(part) + 1
    parts.push(part)
  }
  return `{${parts.join(",")}}`
}

/**
 * One JSON line, as `Logger.json` prints it (`message`, `logLevel`, `timestamp`, `cause` when there is one,
 * `annotations`, `spans`, `fiberId`), each field bounded so that the line takes at most `LOG_LINE_BYTES`. PURE.
 */
export const formatLogLine = (entry: LogEntry): string => {
  const messages = Array.isArray(entry.message) ? entry.message : [entry.message]
  const message = boundedJson(
    messages.length === 1 ? errorJson(structured(messages[0])) : messages.map((m) => errorJson(structured(m))),
    LOG_FIELD_BYTES
  )
  const fields = [
    ...(message === undefined ? [] : [`"message":${message}`]),
    `"logLevel":${name(entry.logLevel)}`,
    `"timestamp":${name(entry.timestamp)}`,
    ...(entry.cause === undefined ? [] : [`"cause":${JSON.stringify(clipJsonString(entry.cause, LOG_CAUSE_BYTES))}`]),
    `"annotations":${annotationsJson(entry.annotations)}`,
    `"spans":${spansJson(entry.spans)}`,
    `"fiberId":${name(entry.fiberId)}`
  ]
  return `{${fields.join(",")}}`
}

// The pretty format: one line per event, `time LEVEL message key=value …`, under the same bounds as the JSON one.

const ANSI = { reset: "\x1b[0m", dim: "\x1b[2m", red: "\x1b[31m", yellow: "\x1b[33m", green: "\x1b[32m", gray: "\x1b[90m" }

const levelColour = (label: string): string =>
  label === "ERROR" || label === "FATAL"
    ? ANSI.red
    : label === "WARN" || label === "WARNING"
    ? ANSI.yellow
    : label === "INFO"
    ? ANSI.green
    : ANSI.gray

/** A text printed as it is: a short word of characters that need no quoting. */
const BARE = /^[\w.:/@+<>-]{1,200}$/
/** What a terminal acts on that `JSON.stringify` leaves as it is: DEL, the C1 controls, the line separators. */
const UNSAFE = /[\u007f-\u009f\u2028\u2029]/
const UNSAFE_ALL = /[\u007f-\u009f\u2028\u2029]/g

/** JSON text (a string's or a value's) with what a terminal would act on replaced, within `max` bytes. */
const terminalSafe = (json: string, max: number): string => {
  if (!UNSAFE.test(json)) return json
  const replaced = json.replace(UNSAFE_ALL, "\ufffd")
  return utf8Bytes(replaced) <= max ? replaced : JSON.stringify(clipJsonString(replaced, max))
}

/** A text, bare when it can be, else quoted as a JSON string, within `max` bytes. */
const prettyText = (text: string, max: number): string =>
  BARE.test(text) ? text : terminalSafe(JSON.stringify(clipJsonString(text, max)), max)

/** A value as a pretty line prints it (undefined: left out, as are `null`s, which say "none"). */
const prettyValue = (value: unknown, max: number): string | undefined => {
  const v = structured(value)
  if (v === null || v === undefined) return undefined
  if (typeof v === "string") return prettyText(v, max)
  // Measured times to the microsecond at most: a person reads 9.113, not 9.113029000000097.
  if (typeof v === "number") return String(Number.isInteger(v) ? v : Math.round(v * 1000) / 1000)
  if (typeof v === "boolean") return String(v)
  const json = boundedJson(v, max)
  return json === undefined ? undefined : terminalSafe(json, max)
}

/** What a person looks for first in the edge's lines (the access log's, a run's summary); the rest follows by name. */
const LEADING = ["method", "path", "status", "model", "outcome", "duration_ms", "error", "error_cause"]

const fieldOrder = (a: readonly [string, unknown], b: readonly [string, unknown]): number => {
  const i = LEADING.indexOf(a[0])
  const j = LEADING.indexOf(b[0])
  if (i !== j) return i === -1 ? 1 : j === -1 ? -1 : i - j
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0
}

/** `key=value` parts in `budget` bytes; those that do not fit are counted as `clipped_annotations`. */
const prettyFields = (fields: ReadonlyArray<readonly [string, unknown]>, budget: number): string => {
  // Room for ` clipped_annotations=<count>`.
  const reserve = 32
  let used = 0
  let clipped = 0
  let out = ""
  for (const [key, value] of fields) {
    const k = prettyText(key, LOG_NAME_BYTES)
    const room = Math.min(LOG_FIELD_BYTES, budget - reserve - used - utf8Bytes(k) - 2)
    const v = room < 32 ? undefined : prettyValue(value, room)
    if (room < 32 || (v !== undefined && utf8Bytes(v) > room)) {
      clipped++
      continue
    }
    if (v === undefined) continue
    const part = ` ${k}=${v}`
    used += utf8Bytes(part)
    out += part
  }
  return clipped > 0 ? `${out} clipped_annotations=${clipped}` : out
}

/** `HH:MM:SS.mmm` of an ISO timestamp, in local time (the timestamp as it is when it is not one). */
const timeOfDay = (timestamp: string): string => {
  const date = new Date(timestamp)
  if (Number.isNaN(date.getTime())) return prettyText(timestamp, LOG_NAME_BYTES)
  const two = (n: number) => String(n).padStart(2, "0")
  return `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}.${String(date.getMilliseconds()).padStart(3, "0")}`
}

/**
 * One event as a person reads it on a terminal: `time LEVEL message key=value …` (local time; the fields a person
 * looks for first, then the rest by name; values bare when they can be, else quoted; `null`s left out), its spans as `label=Nms`, and a cause, if any, on the lines after
 * it, each indented. Bounded as `formatLogLine` is: the message and each value at most `LOG_FIELD_BYTES`, the
 * annotations `LOG_ANNOTATIONS_BYTES`, the spans `LOG_SPANS_BYTES`, the cause `LOG_CAUSE_BYTES`, so an event
 * takes at most `LOG_LINE_BYTES`. Nothing a request carries can start a line of its own or drive the terminal:
 * only the cause's lines break it, and each of them starts with spaces. PURE.
 */
export const formatPrettyLine = (entry: LogEntry, colors: boolean): string => {
  const messages = Array.isArray(entry.message) ? entry.message : [entry.message]
  const message = clipJsonString(
    messages.map((m) => {
      const v = structured(m)
      return typeof v === "string" && !UNSAFE.test(v) && !/[\u0000-\u001f]/.test(v) ? v : prettyValue(m, LOG_FIELD_BYTES) ?? ""
    }).join(" "),
    LOG_FIELD_BYTES
  )
  const level = prettyText(entry.logLevel, LOG_NAME_BYTES).padEnd(5)
  const spans = prettyFields(
    entry.spans.map(([label, ms]) => [label, `${Number.isFinite(ms) ? ms : "?"}ms`] as const),
    LOG_SPANS_BYTES
  )
  const head = colors
    ? `${ANSI.dim}${timeOfDay(entry.timestamp)}${ANSI.reset} ${levelColour(entry.logLevel)}${level}${ANSI.reset} ${message}`
    : `${timeOfDay(entry.timestamp)} ${level} ${message}`
  const line = head + prettyFields([...entry.annotations].sort(fieldOrder), LOG_ANNOTATIONS_BYTES) + spans
  if (entry.cause === undefined) return line
  const cause = clipJsonString(entry.cause, LOG_CAUSE_BYTES)
    .replace(/\r/g, "")
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/g, "\ufffd")
    .split("\n")
    .map((l) => `  ${l}`)
    .join("\n")
  return `${line}\n${clipJsonString(cause, LOG_CAUSE_BYTES)}`
}

/** A logger's input as a `LogEntry`. */
export const logEntry = (options: Logger.Logger.Options<unknown>): LogEntry => {
  const now = options.date.getTime()
  return {
    message: options.message,
    logLevel: options.logLevel.label,
    timestamp: options.date.toISOString(),
    cause: Cause.isEmpty(options.cause) ? undefined : Cause.pretty(options.cause, { renderErrorCause: true }),
    annotations: Array.from(HashMap.toEntries(options.annotations)),
    spans: List.toArray(options.spans).map((span) => [span.label, now - span.startTime] as const),
    fiberId: FiberId.threadName(options.fiberId)
  }
}

/** Bounded JSON lines (see `formatLogLine`). */
export const boundedJsonLogger: Logger.Logger<unknown, string> = Logger.make((options) =>
  formatLogLine(logEntry(options))
)

/** Readable lines (see `formatPrettyLine`), in colour when `colors`. */
export const boundedPrettyLogger = (colors: boolean): Logger.Logger<unknown, string> =>
  Logger.make((options) => formatPrettyLine(logEntry(options), colors))

/** Where the lines go: whether stdout is a terminal (`auto` is pretty there), and whether it takes colours. */
export interface LogOutput {
  readonly isTTY: boolean
  readonly colors: boolean
}

/**
 * Bounded lines on stdout at the configured level, in `log.format`: JSON (one object per line, with the fiber's
 * log annotations) or pretty (one readable line per event). Request bodies are never logged; values that are
 * logged are clipped (see `formatLogLine`, `formatPrettyLine`).
 */
export const layer = (
  log: Pick<LogConfig, "level" | "format">,
  output: LogOutput = { isTTY: false, colors: false }
): Layer.Layer<never> =>
  Layer.merge(
    Logger.replace(
      Logger.defaultLogger,
      Logger.withConsoleLog(
        chooseFormat(log.format, output.isTTY) === "pretty" ? boundedPrettyLogger(output.colors) : boundedJsonLogger
      )
    ),
    Logger.minimumLogLevel(levels[log.level])
  )
