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
  traceStreams: Schema.optionalWith(Schema.Boolean, { default: () => false })
})
export type LogConfig = typeof LogConfig.Type


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

/**
 * Bounded JSON lines on stdout (one object per line, with the fiber's log annotations), at the configured level.
 * Request bodies are never logged; values that are logged are clipped (see `formatLogLine`).
 */
export const layer = (level: LogConfig["level"]): Layer.Layer<never> =>
  Layer.merge(
    Logger.replace(Logger.defaultLogger, Logger.withConsoleLog(boundedJsonLogger)),
    Logger.minimumLogLevel(levels[level])
  )
