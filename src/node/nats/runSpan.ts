import type * as Fiber from "effect/Fiber"
import * as Tracer from "effect/Tracer"
import { parseTraceparent } from "../../common/traceparent.js"
import * as Tracing from "../../observability/Tracing.js"
import type { NodeId } from "../../protocol/RunEvent.js"
import type { SubmitRunRequest } from "../../protocol/SubmitRunRequest.js"
import type { RunStart } from "./protocol.js"

/** A run a node was asked for, as its provider gets it: in the node's span of it, when the node traces. */
export interface NodeRun {
  readonly request: SubmitRunRequest
  readonly span: Tracing.EdgeSpan | undefined
}

/**
 * The trace an edge's RunStart carries, continued on the node: when the node traces, a span of its own
 * (`iop.node.run`, SERVER, a child of the edge's attempt) whose context the provider's upstream gets; else the
 * edge's context as it came, so that the upstream still joins the request's trace.
 */
export const continueRun = (fiber: Fiber.RuntimeFiber<unknown, unknown>, nodeId: NodeId, start: RunStart): NodeRun => {
  const remote = parseTraceparent(start.request.traceparent)
  const span = remote === undefined
    ? undefined
    : Tracing.begin(fiber, "iop.node.run", "server", Tracer.externalSpan(remote))
  if (span === undefined) return { request: start.request, span }
  Tracing.annotate(span.span, {
    "iop.node": nodeId,
    "iop.run_id": start.runId,
    "iop.edge": start.edgeId,
    "gen_ai.request.model": start.request.model
  })
  return { request: { ...start.request, traceparent: Tracing.traceparentOf(span.span) }, span }
}
