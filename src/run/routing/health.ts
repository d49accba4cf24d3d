import type { RunError } from "../../protocol/errors.js"
import type { Failed, RunEvent } from "../../protocol/RunEvent.js"

/**
 * A node's health as its runs show it (passive) or its upstream's `/health` does (active): plain data and
 * transitions, the time passed in (the registry reads it from the `Clock`).
 *
 * A node is ejected at once when its upstream could not be reached or its stream broke, or after
 * `failuresToEject` failures in a row of another kind (an HTTP 5xx, a run that timed out waiting for it). It is
 * ejected for a backoff that doubles with each ejection since it last served a run well (1 s, 2 s, 4 s, ... at
 * most 60 s); then it takes runs again, on probation: its next failure ejects it again at once, for the doubled
 * backoff; a success clears it. An ejected node gets no run while another node of the model can take it.
 */

/** How a run went on a node, for its health: `unreachable` (no answer, or the stream broke), `failed` (5xx, timeout). */
export type RunHealth = "ok" | "unreachable" | "failed"

export interface Health {
  /** Failures in a row since its last success (or its last ejection). */
  readonly failures: number
  /** Ejections since it last served a run well: the next backoff's exponent. */
  readonly ejections: number
  /** Until when it is ejected (the clock's millis); 0: never was. */
  readonly ejectedUntil: number
}

export interface HealthPolicy {
  readonly failuresToEject: number
  readonly baseBackoffMs: number
  readonly maxBackoffMs: number
}

export const DEFAULT_HEALTH_POLICY: HealthPolicy = { failuresToEject: 3, baseBackoffMs: 1_000, maxBackoffMs: 60_000 }

export const HEALTHY: Health = { failures: 0, ejections: 0, ejectedUntil: 0 }

export const isEjected = (h: Health, now: number): boolean => now < h.ejectedUntil

export const backoffMs = (ejections: number, policy: HealthPolicy): number =>
  Math.min(policy.maxBackoffMs, policy.baseBackoffMs * 2 ** Math.min(ejections, 30))

/**
 * The node's health after a run that went `outcome` at `now`, and whether that ejected it. A node on probation
 * (ejected before, not yet recovered) is ejected again by any failure.
 */
export const observe = (
  h: Health,
  outcome: RunHealth,
  now: number,
  policy: HealthPolicy = DEFAULT_HEALTH_POLICY
): { readonly health: Health; readonly ejected: boolean } => {
  if (outcome === "ok") return { health: HEALTHY, ejected: false }
  // Runs already in flight when it was ejected may still fail: they do not extend the ejection.
  if (isEjected(h, now)) return { health: h, ejected: false }
  const failures = h.failures + 1
  const eject = outcome === "unreachable" || failures >= policy.failuresToEject || h.ejections > 0
  if (!eject) return { health: { ...h, failures }, ejected: false }
  return {
    health: { failures: 0, ejections: h.ejections + 1, ejectedUntil: now + backoffMs(h.ejections, policy) },
    ejected: true
  }
}

/**
 * A passing active check (`/health` answered 200): an ejected node is on probation at once (its next failure ejects
 * it again, for the doubled backoff); a node in service is left as it is (its runs say more than the check).
 */
export const recover = (h: Health, now: number): Health => (isEjected(h, now) ? { ...h, ejectedUntil: now } : h)

/**
 * A failure before the upstream accepted the run that another node may not share: no answer, a broken answer, an
 * HTTP 5xx. A 4xx is the request's own (it would fail anywhere); nothing was written to the caller yet.
 */
export const isNodeFault = (failed: Failed): boolean =>
  failed.transport !== undefined || (failed.upstream !== undefined && failed.upstream.status >= 500)

/**
 * What a run's end says of its node's health: its terminal event, or the error that ended it otherwise; undefined
 * when it says nothing (a 4xx, a cancellation, a client that left or stopped reading).
 */
export const healthOf = (terminal: RunEvent | undefined, failure: RunError | undefined): RunHealth | undefined => {
  if (terminal !== undefined) {
    switch (terminal._tag) {
      case "Complete":
        return "ok"
      case "Failed":
        return terminal.transport !== undefined ? "unreachable" : isNodeFault(terminal) ? "failed" : undefined
      default:
        return undefined
    }
  }
  // The upstream went silent while the reader waited for it: a timeout, the node's.
  return failure?._tag === "RunIdle" ? "failed" : undefined
}
