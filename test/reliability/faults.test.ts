import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import {
  ABORT_LAG_BUDGET_MS,
  clientAbortTrials,
  FAULTS,
  faultEdgeConfig,
  NORMAL_IDLE_TIMEOUT_MS,
  runFault,
  SHORT_IDLE_TIMEOUT_MS,
  sigtermDuringStreams
} from "./harness/faults.js"
import { startTrackedUpstream, type TrackedUpstream } from "./harness/upstream.js"

/**
 * Every fault ends in exactly one terminal outcome for the client, no upstream
 * request is left open, and `iop_active_runs` / `iop_active_streams` come back
 * to 0. `npm run soak` runs the same table at soak scale (bench/soak.ts), and
 * this file at its soak tier (IOP_SOAK=1): more trials, and the contract's
 * 1 s bound on cancelling an upstream request checked as a budget. `npm test`
 * checks only that every cancellation happens.
 *
 * IOP_FAULT_TRIALS (default 3): requests per fault row.
 * IOP_ABORT_TRIALS (default 20; soak tier 100): client-abort trials. IOP_ABORT_SEED: their seed.
 * IOP_SIGTERM_STREAMS (default 20; soak tier 100): streams open when SIGTERM arrives.
 */

const SOAK = process.env["IOP_SOAK"] === "1"

const envInt = (name: string, fallback: number): number => {
  const value = Number(process.env[name])
  return Number.isInteger(value) && value > 0 ? value : fallback
}

const FAULT_TRIALS = envInt("IOP_FAULT_TRIALS", 3)
const ABORT_TRIALS = envInt("IOP_ABORT_TRIALS", SOAK ? 100 : 20)
const ABORT_SEED = envInt("IOP_ABORT_SEED", 20_261_130)
const SIGTERM_STREAMS = envInt("IOP_SIGTERM_STREAMS", SOAK ? 100 : 20)
/** The soak tier checks the 1 s bound; `npm test` only that the abort comes (its upstream would run 20 s). */
const ABORTS = SOAK
  ? { abortLagBudgetMs: ABORT_LAG_BUDGET_MS }
  : { abortLagBudgetMs: Number.POSITIVE_INFINITY, upstreamTokens: 1_000 }

describe("faults: one terminal outcome, no upstream request left open, no run left active", () => {
  let upstream: TrackedUpstream
  /** `runs.idleTimeoutMs` 5 s: every fault but the stalls, and the client aborts. */
  let edge: EdgeProcess
  /** `runs.idleTimeoutMs` 300 ms: the stalls. */
  let stallEdge: EdgeProcess

  beforeAll(async () => {
    upstream = await startTrackedUpstream()
    ;[edge, stallEdge] = await Promise.all([
      startEdge({ config: faultEdgeConfig(upstream.url, NORMAL_IDLE_TIMEOUT_MS) }),
      startEdge({ config: faultEdgeConfig(upstream.url, SHORT_IDLE_TIMEOUT_MS) })
    ])
  })
  afterAll(async () => {
    await Promise.all([edge?.stop("SIGKILL"), stallEdge?.stop("SIGKILL")])
    await upstream?.close()
  })

  /** Output of an edge that is no longer running, for the failure message. */
  const crashed = (e: EdgeProcess): string =>
    e.proc.exitCode === null && e.proc.signalCode === null
      ? ""
      : `\nthe edge exited (${e.proc.exitCode ?? e.proc.signalCode}):\n${e.stderr().slice(-4_000)}\n${e.stdout().slice(-4_000)}`

  for (const spec of FAULTS) {
    it(spec.fault, async () => {
      const target = spec.shortIdle ? stallEdge : edge
      const row = await runFault(target, upstream, spec, FAULT_TRIALS, 4, ABORTS)
      expect(row.violations, JSON.stringify(row, null, 1) + crashed(target)).toEqual([])
    })
  }

  it(`client abort at a random point: ${ABORT_TRIALS} streams aborted after 0–50 ms, every upstream request aborted${SOAK ? " within 1 s" : ""}, no run left`, async () => {
    const row = await clientAbortTrials(edge, upstream, ABORT_TRIALS, { seed: ABORT_SEED, concurrency: 8, ...ABORTS })
    console.log(`client abort: ${JSON.stringify(row.upstream)}; ${row.note ?? ""}`)
    expect(row.violations, JSON.stringify({ ...row, violations: undefined }, null, 1) + crashed(edge)).toEqual([])
    expect(row.trials).toBe(ABORT_TRIALS)
  }, 60_000)

  it("the edges still serve after the faults", async () => {
    for (const e of [edge, stallEdge]) {
      expect(crashed(e)).toBe("")
      const response = await fetch(`${e.url}/healthz`)
      expect(response.status).toBe(200)
    }
  })
})

describe("SIGTERM during open streams", () => {
  it(`${SIGTERM_STREAMS} open echo streams: each ends with a finish or run_error then [DONE], exit 0`, async () => {
    const row = await sigtermDuringStreams((config) => startEdge({ config }), SIGTERM_STREAMS, 1_000)
    console.log(`SIGTERM: ${JSON.stringify(row.outcomes)}; ${row.note ?? ""}`)
    expect(row.violations, JSON.stringify({ ...row, violations: undefined }, null, 1)).toEqual([])
    expect(row.exitCode).toBe(0)
  }, 60_000)
})
