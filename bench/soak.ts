/**
 * The soak: `npm run soak` (builds dist/, compiles this with tsconfig.soak.json, runs it).
 *
 * 1. 500 concurrent streams for SOAK_SECONDS (default 60) through the echo
 *    provider (20 ms a token), then as long through a fake upstream: zero
 *    errors, every stream well-formed with exactly its text, `iop_active_runs`
 *    and `iop_active_streams` back to 0, RSS of the edge sampled every second
 *    (start / peak / end) and its CPU seconds.
 * 2. The fault table at soak scale (test/reliability/harness/faults.ts).
 * 3. The fuzz at 10,000 cases (test/reliability/harness/fuzz.ts).
 *
 * Prints a summary and writes bench/soak-results.json; exits 1 when anything
 * broke the contract. Environment: SOAK_SECONDS, SOAK_STREAMS (500),
 * SOAK_FAULT_TRIALS (100), SOAK_ABORT_TRIALS (1000), SOAK_SIGTERM_STREAMS (500),
 * SOAK_FUZZ_CASES (10000), SOAK_SEED. Everything runs on 127.0.0.1; every
 * child process is killed at the end.
 */
import { writeFileSync } from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { cpuSeconds, type EdgeLike, killSpawned, repoRoot, sampleRss, spawnEdge } from "../test/reliability/harness/edge.js"
import {
  clientAbortTrials,
  type FaultRow,
  FAULTS,
  faultEdgeConfig,
  NORMAL_IDLE_TIMEOUT_MS,
  runFault,
  SHORT_IDLE_TIMEOUT_MS,
  sigtermDuringStreams
} from "../test/reliability/harness/faults.js"
import { type FuzzReport, fuzzEdgeConfig, GIANT_MAX_SOAK, runFuzz } from "../test/reliability/harness/fuzz.js"
import { holdStreams, type PhaseResult, scriptSoakUpstream, soakEdgeConfig } from "../test/reliability/harness/soak.js"
import { startTrackedUpstream, type TrackedUpstream } from "../test/reliability/harness/upstream.js"
import { envCount } from "./env.js"
import { fixed, table } from "./table.js"

const SECONDS = envCount("SOAK_SECONDS", 60)
const STREAMS = envCount("SOAK_STREAMS", 500)
const FAULT_TRIALS = envCount("SOAK_FAULT_TRIALS", 100)
const ABORT_TRIALS = envCount("SOAK_ABORT_TRIALS", 1_000)
const SIGTERM_STREAMS = envCount("SOAK_SIGTERM_STREAMS", 500)
const FUZZ_CASES = envCount("SOAK_FUZZ_CASES", 10_000)
const SEED = envCount("SOAK_SEED", 20_261_130)

/** A hard ceiling on the whole run: whatever hangs, the soak ends and kills its children. */
const HARD_LIMIT_MS = (SECONDS * 2 + 1_200) * 1_000

const log = (line: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`)

interface StreamsSection {
  readonly phases: ReadonlyArray<PhaseResult>
  readonly rssMiB: { readonly start: number; readonly peak: number; readonly end: number; readonly samples: ReadonlyArray<readonly [number, number]> }
  readonly cpuSeconds: number
  readonly wallSeconds: number
  readonly exitCode: number | null
}

const streamsSection = async (): Promise<StreamsSection> => {
  const upstream = await startTrackedUpstream()
  scriptSoakUpstream(upstream)
  let edge: EdgeLike | undefined
  try {
    edge = await spawnEdge(soakEdgeConfig(upstream.url))
    const pid = edge.proc.pid!
    const rss = sampleRss(pid, 1_000)
    const cpu0 = cpuSeconds(pid)
    const t0 = Date.now()
    const phases: Array<PhaseResult> = []
    for (const model of ["echo", "up"] as const) {
      const phase = model === "echo" ? "echo provider" : "fake upstream"
      log(`${phase}: ${STREAMS} concurrent streams for ${SECONDS} s`)
      const result = await holdStreams(edge, {
        phase,
        model,
        concurrency: STREAMS,
        seconds: SECONDS,
        upstream,
        onTick: (tick) => {
          if (Math.round(tick.t / 1_000) % 10 === 0) {
            log(`  t=${Math.round(tick.t / 1_000)} s open=${tick.open} done=${tick.done} iop_active_streams=${tick.edgeStreams} rss=${fixed(rss.samples.at(-1)?.rssMiB ?? Number.NaN, 0)} MiB`)
          }
        },
        ...(model === "up" ? { upstream } : {})
      })
      phases.push(result)
      log(`  ${result.streams} streams, ${result.failed} failed, ${fixed(result.tokensPerSecond, 0)} tokens/s, idle again after ${String(result.idleAfterMs)} ms`)
    }
    const cpu = cpuSeconds(pid) - cpu0
    const wall = (Date.now() - t0) / 1_000
    rss.stop()
    const summary = rss.summary()
    const exitCode = await edge.stop("SIGTERM")
    return {
      phases,
      rssMiB: {
        start: summary.startMiB,
        peak: summary.peakMiB,
        end: summary.endMiB,
        samples: rss.samples.map((s) => [Math.round(s.t / 1_000), Math.round(s.rssMiB * 10) / 10] as const)
      },
      cpuSeconds: cpu,
      wallSeconds: wall,
      exitCode
    }
  } finally {
    await edge?.stop("SIGKILL")
    await upstream.close()
  }
}

const faultsSection = async (): Promise<ReadonlyArray<FaultRow>> => {
  const upstream: TrackedUpstream = await startTrackedUpstream()
  const edges: Array<EdgeLike> = []
  try {
    const [edge, stallEdge] = await Promise.all([
      spawnEdge(faultEdgeConfig(upstream.url, NORMAL_IDLE_TIMEOUT_MS)),
      spawnEdge(faultEdgeConfig(upstream.url, SHORT_IDLE_TIMEOUT_MS))
    ])
    edges.push(edge, stallEdge)
    const rows: Array<FaultRow> = []
    for (const spec of FAULTS) {
      const row = await runFault(spec.shortIdle ? stallEdge : edge, upstream, spec, FAULT_TRIALS, 20)
      rows.push(row)
      log(`  ${row.fault}: ${JSON.stringify(row.outcomes)} ${row.violations.length === 0 ? "ok" : `${row.violations.length} violations`}`)
    }
    const abort = await clientAbortTrials(edge, upstream, ABORT_TRIALS, { seed: SEED, concurrency: 16 })
    rows.push(abort)
    log(`  ${abort.fault}: ${JSON.stringify(abort.upstream)} ${abort.violations.length === 0 ? "ok" : `${abort.violations.length} violations`}`)
    const sigterm = await sigtermDuringStreams(async (config) => {
      const e = await spawnEdge(config)
      edges.push(e)
      return e
    }, SIGTERM_STREAMS, 1_000, 120_000)
    rows.push(sigterm)
    log(`  ${sigterm.fault}: ${JSON.stringify(sigterm.outcomes)} exit ${String(sigterm.exitCode)} ${sigterm.violations.length === 0 ? "ok" : `${sigterm.violations.length} violations`}`)
    return rows
  } finally {
    await Promise.all(edges.map((e) => e.stop("SIGKILL")))
    await upstream.close()
  }
}

const fuzzSection = async (): Promise<FuzzReport & { readonly rssMiB: { start: number; peak: number; end: number }; readonly cpuSeconds: number }> => {
  const edge = await spawnEdge(fuzzEdgeConfig())
  try {
    const pid = edge.proc.pid!
    const rss = sampleRss(pid, 1_000)
    const cpu0 = cpuSeconds(pid)
    const report = await runFuzz(edge, { cases: FUZZ_CASES, seed: SEED, concurrency: 8, giantMax: GIANT_MAX_SOAK })
    const cpu = cpuSeconds(pid) - cpu0
    rss.stop()
    const s = rss.summary()
    return { ...report, rssMiB: { start: s.startMiB, peak: s.peakMiB, end: s.endMiB }, cpuSeconds: cpu }
  } finally {
    await edge.stop("SIGKILL")
  }
}

const countOf = (record: Record<string, number>): string =>
  Object.entries(record)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ×${v}`)
    .join(", ")

const main = async () => {
  const started = Date.now()
  const hardStop = setTimeout(() => {
    log(`the soak ran over its hard limit of ${HARD_LIMIT_MS / 1_000} s: killing everything`)
    killSpawned()
    process.exit(2)
  }, HARD_LIMIT_MS)
  hardStop.unref()
  log(`soak: ${STREAMS} streams × ${SECONDS} s per phase, faults ×${FAULT_TRIALS}, client aborts ×${ABORT_TRIALS}, SIGTERM with ${SIGTERM_STREAMS} streams, fuzz ×${FUZZ_CASES}; ${os.cpus().length} CPUs, load ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`)

  const streams = await streamsSection()
  log("faults at soak scale")
  const faults = await faultsSection()
  log(`fuzz: ${FUZZ_CASES} cases`)
  const fuzz = await fuzzSection()
  log(`fuzz: ${fuzz.violationCount} failing cases in ${fuzz.ms} ms`)

  const violations = [
    ...streams.phases.flatMap((p) => p.violations),
    ...(streams.exitCode === 0 ? [] : [`soak edge exit code ${String(streams.exitCode)} after SIGTERM`]),
    ...faults.flatMap((f) => f.violations.map((v) => `${f.fault}: ${v}`)),
    ...fuzz.violations
  ]

  const out: Array<string> = []
  out.push("", "== streams (edge process) ==")
  out.push(
    table(
      ["phase", "streams held", "streams done", "failed", "tokens/s", "stream p50 ms", "stream p99 ms", "edge active max", "loop lag max ms", "idle after ms", "upstream ends"],
      streams.phases.map((p) => [
        p.phase,
        `${p.heldMin}–${p.heldMax}`,
        String(p.streams),
        String(p.failed),
        fixed(p.tokensPerSecond, 0),
        fixed(p.streamMs.p50, 0),
        fixed(p.streamMs.p99, 0),
        String(p.edgeActiveStreamsMax),
        fixed(p.eventLoopLagMaxMs, 0),
        p.idleAfterMs === undefined ? "NOT IDLE" : String(p.idleAfterMs),
        p.upstreamEnds === undefined ? "" : countOf(p.upstreamEnds)
      ])
    )
  )
  out.push(
    `RSS MiB start ${fixed(streams.rssMiB.start, 1)} / peak ${fixed(streams.rssMiB.peak, 1)} / end ${fixed(streams.rssMiB.end, 1)}; ` +
      `edge CPU ${fixed(streams.cpuSeconds, 1)} s over ${fixed(streams.wallSeconds, 1)} s (${fixed((100 * streams.cpuSeconds) / streams.wallSeconds, 0)} % of one core); exit ${String(streams.exitCode)} on SIGTERM`
  )
  out.push("", "== faults ==")
  out.push(
    table(
      ["fault", "trials", "client outcomes", "upstream requests", "max abort lag ms", "violations", "ms", "note"],
      faults.map((f) => [
        f.fault,
        String(f.trials),
        countOf(f.outcomes),
        countOf(f.upstream),
        f.maxAbortLagMs === undefined ? "" : String(f.maxAbortLagMs),
        String(f.violations.length),
        String(f.ms),
        f.note ?? ""
      ])
    )
  )
  out.push("", "== fuzz ==")
  out.push(
    `${fuzz.cases} cases (seed ${fuzz.seed}) in ${fixed(fuzz.ms / 1_000, 1)} s: ${countOf(fuzz.statuses)}; ` +
      `p50 ${fuzz.p50Ms} ms, p99 ${fuzz.p99Ms} ms, max ${fuzz.maxMs} ms; failing cases ${fuzz.violationCount}; ` +
      `edge RSS MiB ${fixed(fuzz.rssMiB.start, 1)} / ${fixed(fuzz.rssMiB.peak, 1)} / ${fixed(fuzz.rssMiB.end, 1)}, CPU ${fixed(fuzz.cpuSeconds, 1)} s`
  )
  out.push(
    table(
      ["kind", "answers"],
      Object.entries(fuzz.byKind).map(([kind, answers]) => [kind, countOf(answers)])
    )
  )
  if (fuzz.slowest.length > 0) out.push("slowest:", ...fuzz.slowest.map((s) => `  ${s}`))
  out.push("", violations.length === 0 ? "no violations" : `${violations.length} violations:`)
  for (const v of violations.slice(0, 60)) out.push(`  - ${v}`)
  process.stdout.write(out.join("\n") + "\n")

  const results = {
    date: new Date().toISOString(),
    node: process.version,
    cpus: os.cpus().length,
    loadavg: os.loadavg(),
    settings: { seconds: SECONDS, streams: STREAMS, faultTrials: FAULT_TRIALS, abortTrials: ABORT_TRIALS, sigtermStreams: SIGTERM_STREAMS, fuzzCases: FUZZ_CASES, seed: SEED },
    wallSeconds: (Date.now() - started) / 1_000,
    streams,
    faults,
    fuzz,
    violations
  }
  const file = join(repoRoot(), "bench", "soak-results.json")
  writeFileSync(file, JSON.stringify(results, null, 2) + "\n")
  log(`wrote ${file}`)
  clearTimeout(hardStop)
  killSpawned()
  process.exitCode = violations.length === 0 ? 0 : 1
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    killSpawned()
    process.exit(130)
  })
}
process.on("exit", () => killSpawned())

main().catch((e: unknown) => {
  console.error(e)
  killSpawned()
  process.exit(1)
})
