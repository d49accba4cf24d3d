/**
 * W3C Trace Context's `traceparent` (version 00): the one carrier of a trace the edge passes on, to an upstream's
 * request headers and in a run's submission to a node. PURE.
 */

/** A span's place in a trace, as `traceparent` carries it. */
export interface TraceContext {
  /** 32 lowercase hex digits, not all zero. */
  readonly traceId: string
  /** 16 lowercase hex digits, not all zero. */
  readonly spanId: string
  readonly sampled: boolean
}

const TRACEPARENT = /^([\da-f]{2})-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})(-.*)?$/
const ZEROES = /^0+$/

/** `00-{trace id}-{span id}-{flags}`; the flags say only whether the span is sampled. */
export const formatTraceparent = (span: TraceContext): string =>
  `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}`

/**
 * The trace context a `traceparent` value names, or undefined when it names none (as the spec says a receiver
 * treats it): a malformed value, the invalid version `ff`, an all-zero id, or fields after the flags in version
 * 00. A later version's value is read by its first four fields.
 */
export const parseTraceparent = (value: string | undefined): TraceContext | undefined => {
  if (value === undefined || value.length > 512) return undefined
  const match = TRACEPARENT.exec(value.trim())
  if (match === null) return undefined
  const [, version = "", traceId = "", spanId = "", flags = "", rest] = match
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined
  if (ZEROES.test(traceId) || ZEROES.test(spanId)) return undefined
  return { traceId, spanId, sampled: (parseInt(flags, 16) & 1) === 1 }
}
