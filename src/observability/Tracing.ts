import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import { formatTraceparent, parseTraceparent } from "../common/traceparent.js"

/**
 * The edge's spans (request, run, attempt; a node's run), made in the tracer of the fiber that serves the request:
 * a host app's own Effect `Tracer`, or the CLI's OTLP exporter. Begun and ended from plain code (no Effect step,
 * no stack trace captured), and not at all when nothing would receive them: tracing disabled, or Effect's built-in
 * tracer, which keeps spans for nobody. Deciding that is two lookups, so a request that is not traced pays for
 * nothing else.
 */

/** Effect's built-in tracer: what a fiber has when no tracer was installed. */
const NATIVE: Tracer.Tracer = Context.get(DefaultServices.liveServices, Tracer.Tracer)

/** A span the edge began, with the tracer and clock that begin its children and end it. */
export interface EdgeSpan {
  readonly span: Tracer.Span
  readonly tracer: Tracer.Tracer
  readonly clock: Clock.Clock
}

type AnyFiber = Fiber.RuntimeFiber<unknown, unknown>

const start = (
  tracer: Tracer.Tracer,
  clock: Clock.Clock,
  name: string,
  kind: Tracer.SpanKind,
  parent: Tracer.AnySpan | undefined
): EdgeSpan => ({
  span: tracer.span(
    name,
    parent === undefined ? Option.none() : Option.some(parent),
    Context.empty(),
    [],
    clock.unsafeCurrentTimeNanos(),
    kind
  ),
  tracer,
  clock
})

/** The tracer the fiber's spans would go to, when they would go anywhere. */
export const activeTracer = (fiber: AnyFiber): Tracer.Tracer | undefined => {
  if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return undefined
  const tracer = Context.get(fiber.currentDefaultServices, Tracer.Tracer)
  return tracer === NATIVE ? undefined : tracer
}

/** A span in the fiber's tracer (a child of `parent`, else a root), or undefined when the fiber does not trace. */
export const begin = (
  fiber: AnyFiber,
  name: string,
  kind: Tracer.SpanKind,
  parent: Tracer.AnySpan | undefined
): EdgeSpan | undefined => {
  const tracer = activeTracer(fiber)
  return tracer === undefined
    ? undefined
    : start(tracer, Context.get(fiber.currentDefaultServices, Clock.Clock), name, kind, parent)
}

/** A child of a span the edge began, in the same tracer. */
export const child = (parent: EdgeSpan, name: string, kind: Tracer.SpanKind): EdgeSpan =>
  start(parent.tracer, parent.clock, name, kind, parent.span)

/** The span the fiber runs in (the caller's: a host app's server span, a typed call's), if any. */
export const currentSpan = (fiber: AnyFiber): Tracer.AnySpan | undefined =>
  Option.getOrUndefined(Context.getOption(fiber.currentContext, Tracer.ParentSpan))

/**
 * What a request's span continues: the span the fiber runs in (a host app's server span already read the
 * client's headers), else the client's `traceparent`, else nothing (a new trace).
 */
export const requestParent = (fiber: AnyFiber, traceparent: string | undefined): Tracer.AnySpan | undefined => {
  const current = currentSpan(fiber)
  if (current !== undefined) return current
  const remote = parseTraceparent(traceparent)
  return remote === undefined ? undefined : Tracer.externalSpan(remote)
}

/** Sets the attributes that have a value (undefined ones are left out). */
export const annotate = (span: Tracer.Span, attributes: Readonly<Record<string, unknown>>): void => {
  for (const key in attributes) {
    const value = attributes[key]
    if (value !== undefined) span.attribute(key, value)
  }
}

/** Ends the span once: with `failure` as its error status (its message), else as a success. */
export const end = (s: EdgeSpan, failure?: Error): void => {
  if (s.span.status._tag === "Ended") return
  s.span.end(s.clock.unsafeCurrentTimeNanos(), failure === undefined ? Exit.void : Exit.fail(failure))
}

/** The `traceparent` that makes whoever receives it a child of `span`. */
export const traceparentOf = (span: Tracer.AnySpan): string => formatTraceparent(span)

/** A log line's correlation with the span: its trace and span ids. */
export const logIds = (span: Tracer.AnySpan): { readonly trace_id: string; readonly span_id: string } => ({
  trace_id: span.traceId,
  span_id: span.spanId
})
