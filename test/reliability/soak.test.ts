import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { cpuSeconds, sampleRss } from "./harness/edge.js"
import { holdStreams, scriptSoakUpstream, soakEdgeConfig } from "./harness/soak.js"
import { startTrackedUpstream, type TrackedUpstream } from "./harness/upstream.js"

/**
 * The bounded form of `npm run soak` (bench/soak.ts): IOP_SOAK_STREAMS
 * concurrent streams of IOP_SOAK_WORDS tokens (default 10) for
 * IOP_SOAK_SECONDS through the echo provider, then as long through a fake
 * upstream: every stream well-formed with exactly its text, the edge back to
 * 0 active runs and streams after each phase, no upstream request left open,
 * exit 0 on SIGTERM. `npm test`: 30 streams × 1 s; the soak tier (IOP_SOAK=1,
 * in `npm run soak`): 100 × 5 s.
 */

const SOAK = process.env["IOP_SOAK"] === "1"

const envInt = (name: string, fallback: number): number => {
  const value = Number(process.env[name])
  return Number.isInteger(value) && value > 0 ? value : fallback
}

const STREAMS = envInt("IOP_SOAK_STREAMS", SOAK ? 100 : 30)
const SECONDS = envInt("IOP_SOAK_SECONDS", SOAK ? 5 : 1)
/** Tokens per stream: shorter than the soak's 20, so that the bounded run's last wave ends soon after its 5 s. */
const WORDS = envInt("IOP_SOAK_WORDS", 10)

describe(`short soak: ${STREAMS} concurrent streams × ${SECONDS} s per phase`, () => {
  let upstream: TrackedUpstream
  let edge: EdgeProcess

  beforeAll(async () => {
    upstream = await startTrackedUpstream()
    scriptSoakUpstream(upstream, WORDS)
    edge = await startEdge({ config: soakEdgeConfig(upstream.url) })
  })
  afterAll(async () => {
    await edge?.stop("SIGKILL")
    await upstream?.close()
  })

  it("holds the streams through the echo provider and the fake upstream, then drains and exits 0", async () => {
    const pid = edge.proc.pid!
    const rss = sampleRss(pid, 1_000)
    const cpu0 = cpuSeconds(pid)
    const echo = await holdStreams(edge, { phase: "echo provider", model: "echo", concurrency: STREAMS, seconds: SECONDS, words: WORDS })
    const up = await holdStreams(edge, { phase: "fake upstream", model: "up", concurrency: STREAMS, seconds: SECONDS, upstream, words: WORDS })
    rss.stop()
    const cpu = cpuSeconds(pid) - cpu0
    const r = rss.summary()
    for (const p of [echo, up]) {
      console.log(
        `soak ${p.phase}: held ${p.heldMin}–${p.heldMax}, ${p.streams} streams (${p.failed} failed), ${p.tokensPerSecond.toFixed(0)} tokens/s, ` +
          `stream p50 ${p.streamMs.p50} ms p99 ${p.streamMs.p99} ms, edge event-loop lag max ${p.eventLoopLagMaxMs.toFixed(0)} ms, ` +
          `idle again after ${String(p.idleAfterMs)} ms`
      )
    }
    console.log(`soak edge: RSS MiB ${r.startMiB.toFixed(1)} / ${r.peakMiB.toFixed(1)} / ${r.endMiB.toFixed(1)}, CPU ${cpu.toFixed(1)} s`)
    for (const p of [echo, up]) {
      expect(p.violations, JSON.stringify({ ...p, violations: undefined })).toEqual([])
      expect(p.failed).toBe(0)
      expect(p.streams).toBeGreaterThanOrEqual(STREAMS)
      expect(p.heldMax).toBe(STREAMS)
      expect(p.idleAfterMs).toBeDefined()
    }
    expect(up.upstreamEnds).toEqual({ completed: up.streams })
    expect(await edge.stop("SIGTERM")).toBe(0)
  }, 30_000 + 4 * SECONDS * 1_000)
})
