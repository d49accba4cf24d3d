/**
 * `npm run bench`: the edge relaying a fast fake upstream, against a minimal
 * node:http relay measured in the same run (the machine is small and noisy,
 * so only ratios to that baseline mean much), then memory per idle open
 * stream, then the filter micro-benchmarks. Prints tables and writes
 * `bench/results.json`. `BENCH_PROFILE=1` also CPU-profiles the edge during
 * the throughput runs and prints where its time goes. Between throughput and
 * memory, the NATS path (edge → nats-server → node) against the edge's embedded
 * node (bench/nats.ts); `BENCH_NATS=0` skips it.
 */
import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { type IdleStreams, openIdleStreams, requestBody, runLoad } from "./load.js"
import {
  ask,
  cpuSeconds,
  fdLimits,
  freePort,
  killAll,
  listeningPort,
  openFds,
  type Proc,
  rssKiB,
  sleep,
  spawnNode,
  stop,
  waitHealthy
} from "./procs.js"
import { measureNats, NATS_SERVER, natsChecks, type NatsFigures, natsTable } from "./nats.js"
import { formatSummary, type ProfileSummary, summarise } from "./profile.js"
import { measureReasoningFilters, type ReasoningFiltersFigures } from "./reasoningFilters.js"
import { fixed, percentile, table } from "./table.js"
import { measureToolTextThroughput, type ToolTextFigures } from "./toolText.js"

const TOKENS = 256
const ROUNDS = 2
const RUN_MS = 2_000
/** Upstream delay between tokens in the paced scenario: 200 tokens/s per stream, a fast model. */
const PACE_MS = 5
const WARMUP_MS = 1_000
const IDLE_STREAMS = 1_000
const CANCEL_WAIT_MS = 8_000
/** The whole bench normally takes under three minutes; past this something hangs: kill everything and fail. */
const WATCHDOG_MS = 8 * 60_000

/**
 * Burst: the upstream writes all events at once (a relay slower than that gets them batched per read).
 * Paced: PACE_MS between events, so a relay that keeps up gets one event per read, as from a real model.
 */
const SCENARIOS = [
  { mode: "burst", model: "bench", concurrency: 1, durationMs: RUN_MS },
  { mode: "burst", model: "bench", concurrency: 16, durationMs: RUN_MS },
  { mode: "burst", model: "bench", concurrency: 64, durationMs: RUN_MS },
  { mode: "paced", model: "paced", concurrency: 16, durationMs: 3_000 }
] as const
type Scenario = (typeof SCENARIOS)[number]

const TARGETS = ["direct", "baseline", "edge"] as const
type TargetName = (typeof TARGETS)[number]

interface Target {
  readonly name: TargetName
  readonly port: number
  /** The measured relay; none for `direct`. */
  readonly proc: Proc | undefined
}

interface UpstreamStats {
  readonly requests: number
  readonly openStalls: number
}

interface MemoryUsage {
  readonly rss: number
  readonly heapUsed: number
  readonly external: number
  readonly arrayBuffers: number
}

interface Sample {
  readonly round: number
  readonly tokens: number
  readonly requests: number
  readonly errors: number
  readonly elapsedMs: number
  readonly relayCpuS: number
  readonly upstreamCpuS: number
  readonly clientCpuS: number
  readonly ttfts: ReadonlyArray<number>
  readonly clientReads: number
  readonly errorSamples: ReadonlyArray<string>
}

const here = dirname(fileURLToPath(import.meta.url))
const root = resolve(here, "../..")
const edgeMain = resolve(here, "../src/bin/main.js")
const agentFlags = ["--expose-gc", "--import", pathToFileURL(resolve(here, "childAgent.js")).href]
const profiling = process.env["BENCH_PROFILE"] === "1"
const natsEnabled = process.env["BENCH_NATS"] !== "0"
const profileDir = join(root, "dist-bench", "profiles")

const log = (text: string) => process.stdout.write(`${text}\n`)

// ---------------------------------------------------------------------------------------------- processes

const startUpstream = async (): Promise<Target & { readonly proc: Proc }> => {
  const proc = spawnNode("upstream", resolve(here, "upstream.js"), [String(TOKENS), String(PACE_MS)])
  return { name: "direct", port: await listeningPort(proc), proc }
}

const startBaseline = async (upstreamPort: number): Promise<Target> => {
  const proc = spawnNode("baseline", resolve(here, "baselineProxy.js"), [String(upstreamPort)], agentFlags)
  return { name: "baseline", port: await listeningPort(proc), proc }
}

const startEdge = async (configFile: string, profile: boolean): Promise<Target> => {
  const port = await freePort()
  const flags = profile ? [...agentFlags, "--cpu-prof", "--cpu-prof-dir", profileDir] : agentFlags
  const proc = spawnNode(
    "edge",
    edgeMain,
    // warn: no per-request lines (those are info), but a reason if it dies.
    ["edge", "--config", configFile, "--port", String(port), "--log-level", "warn"],
    flags
  )
  await waitHealthy(proc, port)
  return { name: "edge", port, proc }
}

const edgeConfig = (upstreamPort: number) => ({
  server: { host: "127.0.0.1" },
  runs: { idleTimeoutMs: 600_000 },
  models: ["bench", "paced", "stall"].map((id) => ({
    id,
    provider: { type: "openai", baseUrl: `http://127.0.0.1:${upstreamPort}/v1`, model: id }
  }))
})

// ---------------------------------------------------------------------------------------------- throughput

const measure = async (
  target: Target,
  upstream: Proc,
  scenario: Scenario,
  round: number,
  durationMs: number = scenario.durationMs
): Promise<Sample> => {
  const relay0 = target.proc ? cpuSeconds(target.proc.pid) : 0
  const upstream0 = cpuSeconds(upstream.pid)
  const client0 = process.cpuUsage()
  const result = await runLoad({
    port: target.port,
    body: requestBody(scenario.model),
    concurrency: scenario.concurrency,
    durationMs,
    expectTokens: TOKENS
  })
  const relayCpuS = target.proc ? cpuSeconds(target.proc.pid) - relay0 : 0
  const upstreamCpuS = cpuSeconds(upstream.pid) - upstream0
  const client = process.cpuUsage(client0)
  return {
    round,
    tokens: result.tokens,
    requests: result.requests,
    errors: result.errors,
    elapsedMs: result.elapsedMs,
    relayCpuS,
    upstreamCpuS,
    clientCpuS: (client.user + client.system) / 1e6,
    ttfts: result.ttfts,
    clientReads: result.clientReads,
    errorSamples: result.errorSamples
  }
}

interface Row {
  readonly mode: Scenario["mode"]
  readonly concurrency: number
  readonly target: TargetName
  readonly tokensPerSec: number
  readonly requests: number
  readonly errors: number
  /** CPU seconds of the relay process per 1000 relayed tokens (all rounds pooled). */
  readonly cpuSecondsPer1kTokens: number
  readonly cpuPer1kByRound: ReadonlyArray<number>
  readonly upstreamCpuSecondsPer1kTokens: number
  readonly clientCpuSecondsPer1kTokens: number
  readonly ttftMs: { readonly p50: number; readonly p99: number; readonly samples: number }
  /** Body reads per response at the client: ~TOKENS + 4 means one write per event. */
  readonly clientReadsPerStream: number
  readonly errorSamples: ReadonlyArray<string>
}

const toRow = (scenario: Scenario, target: TargetName, samples: ReadonlyArray<Sample>): Row => {
  const sum = (f: (s: Sample) => number) => samples.reduce((total, s) => total + f(s), 0)
  const tokens = sum((s) => s.tokens)
  const ttfts = samples.flatMap((s) => s.ttfts).sort((a, b) => a - b)
  return {
    mode: scenario.mode,
    concurrency: scenario.concurrency,
    target,
    tokensPerSec: tokens / (sum((s) => s.elapsedMs) / 1000),
    requests: sum((s) => s.requests),
    errors: sum((s) => s.errors),
    cpuSecondsPer1kTokens: target === "direct" ? Number.NaN : (sum((s) => s.relayCpuS) / tokens) * 1000,
    cpuPer1kByRound: target === "direct" ? [] : samples.map((s) => (s.relayCpuS / s.tokens) * 1000),
    upstreamCpuSecondsPer1kTokens: (sum((s) => s.upstreamCpuS) / tokens) * 1000,
    clientCpuSecondsPer1kTokens: (sum((s) => s.clientCpuS) / tokens) * 1000,
    ttftMs: { p50: percentile(ttfts, 0.5), p99: percentile(ttfts, 0.99), samples: ttfts.length },
    clientReadsPerStream: sum((s) => s.clientReads) / Math.max(1, sum((s) => s.requests)),
    errorSamples: [...new Set(samples.flatMap((s) => s.errorSamples))]
  }
}

const runThroughput = async (upstream: Proc, targets: ReadonlyArray<Target>): Promise<ReadonlyArray<Row>> => {
  for (const target of targets) {
    log(`  warm-up ${target.name}`)
    await measure(target, upstream, SCENARIOS[1], -1, WARMUP_MS)
    await measure(target, upstream, SCENARIOS[3], -1, WARMUP_MS / 4)
  }
  const samples = new Map<string, Array<Sample>>()
  for (let round = 0; round < ROUNDS; round++) {
    for (const scenario of SCENARIOS) {
      // Alternate the order between rounds so that drift in the machine's load does not favour one target.
      const order = round % 2 === 0 ? targets : [...targets].reverse()
      for (const target of order) {
        const sample = await measure(target, upstream, scenario, round)
        const key = `${scenario.mode}/${scenario.concurrency}/${target.name}`
        samples.set(key, [...(samples.get(key) ?? []), sample])
        log(
          `  round ${round + 1} ${scenario.mode} N=${scenario.concurrency} ${target.name}: ` +
            `${fixed(sample.tokens / (sample.elapsedMs / 1000), 0)} tok/s` +
            (sample.errors > 0 ? `, ${sample.errors} errors (${sample.errorSamples.join("; ")})` : "")
        )
      }
    }
  }
  return SCENARIOS.flatMap((scenario) =>
    TARGETS.map((name) => toRow(scenario, name, samples.get(`${scenario.mode}/${scenario.concurrency}/${name}`) ?? []))
  )
}

// ---------------------------------------------------------------------------------------------- idle streams

interface IdleFigures {
  readonly relay: "baseline" | "edge"
  readonly opened: number
  readonly failed: number
  readonly rssBeforeKiB: number
  readonly rssAfterNoGcKiB: number
  readonly rssAfterGcKiB: number
  readonly kibPerStreamNoGc: number
  /** The headline figure: RSS growth per open stream after a forced full GC. */
  readonly kibPerStream: number
  readonly heapKiBPerStream: number
  readonly externalKiBPerStream: number
  readonly fdsBefore: number
  readonly fdsOpen: number
  readonly fdLimit: { readonly soft: number; readonly hard: number }
  readonly upstreamOpenWhileHeld: number
  /** Upstream streams still open when the wait for them ended (0: every hang-up reached the upstream). */
  readonly upstreamOpenAfterClose: number
  /** Time from the clients' hang-up until the upstream saw its last stream close (or the wait ended). */
  readonly cancelPropagationMs: number
}

const gcAndSettle = async (proc: Proc, ms: number): Promise<void> => {
  await ask(proc, "gc")
  await sleep(ms)
}

const measureIdle = async (relay: Target, upstream: Proc): Promise<IdleFigures> => {
  const proc = relay.proc
  if (proc === undefined) throw new Error("idle streams need a relay process")
  // Warm the code paths (JIT, pools) so that the delta is the streams, not first-use allocations.
  await runLoad({ port: relay.port, body: requestBody("bench"), concurrency: 8, durationMs: 1_000, expectTokens: TOKENS })
  const warm = await openIdleStreams({ port: relay.port, body: requestBody("stall"), count: 50, batch: 50, timeoutMs: 10_000 })
  warm.close()
  await sleep(500)
  await gcAndSettle(proc, 1_000)
  const rssBefore = rssKiB(proc.pid)
  const memBefore = await ask<MemoryUsage>(proc, "memory")
  const fdsBefore = openFds(proc.pid)
  let streams: IdleStreams | undefined
  try {
    streams = await openIdleStreams({
      port: relay.port,
      body: requestBody("stall"),
      count: IDLE_STREAMS,
      batch: 100,
      timeoutMs: 20_000
    })
    await sleep(2_000)
    const rssNoGc = rssKiB(proc.pid)
    const fdsOpen = openFds(proc.pid)
    await gcAndSettle(proc, 1_000)
    const rssAfter = rssKiB(proc.pid)
    const memAfter = await ask<MemoryUsage>(proc, "memory")
    const upstreamOpenWhileHeld = (await ask<UpstreamStats>(upstream, "stats")).openStalls
    const { opened, failed } = streams
    const hungUp = performance.now()
    streams.close()
    streams = undefined
    let upstreamOpenAfterClose = upstreamOpenWhileHeld
    while (upstreamOpenAfterClose > 0 && performance.now() - hungUp < CANCEL_WAIT_MS) {
      await sleep(100)
      upstreamOpenAfterClose = (await ask<UpstreamStats>(upstream, "stats")).openStalls
    }
    const cancelPropagationMs = performance.now() - hungUp
    const n = Math.max(1, opened)
    return {
      relay: relay.name === "edge" ? "edge" : "baseline",
      opened,
      failed,
      rssBeforeKiB: rssBefore,
      rssAfterNoGcKiB: rssNoGc,
      rssAfterGcKiB: rssAfter,
      kibPerStreamNoGc: (rssNoGc - rssBefore) / n,
      kibPerStream: (rssAfter - rssBefore) / n,
      heapKiBPerStream: (memAfter.heapUsed - memBefore.heapUsed) / 1024 / n,
      externalKiBPerStream: (memAfter.external - memBefore.external) / 1024 / n,
      fdsBefore,
      fdsOpen,
      fdLimit: fdLimits(proc.pid),
      upstreamOpenWhileHeld,
      upstreamOpenAfterClose,
      cancelPropagationMs
    }
  } finally {
    streams?.close()
  }
}

// ---------------------------------------------------------------------------------------------- report

const throughputTable = (rows: ReadonlyArray<Row>): string => {
  const find = (row: Row, target: TargetName) =>
    rows.find((r) => r.mode === row.mode && r.concurrency === row.concurrency && r.target === target)
  return table(
    [
      "mode",
      "N",
      "through",
      "tok/s",
      "relay CPU ms/1k tok",
      "CPU ratio vs baseline (r1/r2)",
      "TTFT p50 ms",
      "TTFT p99 ms",
      "added p50 ms",
      "added p99 ms",
      "reads/stream",
      "errors"
    ],
    rows.map((row) => {
      const baseline = find(row, "baseline")
      const direct = find(row, "direct")
      const ratio = row.target === "edge" && baseline !== undefined
        ? `${fixed(row.cpuSecondsPer1kTokens / baseline.cpuSecondsPer1kTokens, 2)} (${
          row.cpuPer1kByRound.map((x, i) => fixed(x / (baseline.cpuPer1kByRound[i] ?? Number.NaN), 2)).join("/")
        })`
        : ""
      const added = (p: "p50" | "p99") =>
        row.target === "direct" || direct === undefined ? "" : fixed(row.ttftMs[p] - direct.ttftMs[p], 2)
      return [
        row.mode,
        String(row.concurrency),
        row.target,
        fixed(row.tokensPerSec, 0),
        row.target === "direct" ? "" : fixed(row.cpuSecondsPer1kTokens * 1000, 2),
        ratio,
        fixed(row.ttftMs.p50, 2),
        fixed(row.ttftMs.p99, 2),
        added("p50"),
        added("p99"),
        fixed(row.clientReadsPerStream, 0),
        String(row.errors)
      ]
    })
  )
}

const idleTable = (figures: ReadonlyArray<IdleFigures>): string =>
  table(
    [
      "relay",
      "streams",
      "RSS before MiB",
      "after (no GC) MiB",
      "after GC MiB",
      "KiB/stream (no GC)",
      "KiB/stream (GC)",
      "heap KiB/stream",
      "fds open",
      "fd limit",
      "upstream streams closed after hang-up"
    ],
    figures.map((f) => [
      f.relay,
      String(f.opened),
      fixed(f.rssBeforeKiB / 1024, 1),
      fixed(f.rssAfterNoGcKiB / 1024, 1),
      fixed(f.rssAfterGcKiB / 1024, 1),
      fixed(f.kibPerStreamNoGc, 1),
      fixed(f.kibPerStream, 1),
      fixed(f.heapKiBPerStream, 1),
      `${f.fdsBefore}→${f.fdsOpen}`,
      `${f.fdLimit.soft}/${f.fdLimit.hard}`,
      `${f.upstreamOpenWhileHeld - f.upstreamOpenAfterClose}/${f.upstreamOpenWhileHeld} in ${fixed(f.cancelPropagationMs / 1000, 1)} s`
    ])
  )

interface Check {
  readonly target: string
  readonly value: number
  readonly limit: number
  /** The limit is a floor (≥), not a ceiling. */
  readonly atLeast?: boolean
  readonly pass: boolean
}

const checks = (rows: ReadonlyArray<Row>, idle: ReadonlyArray<IdleFigures>): ReadonlyArray<Check> => {
  const row = (mode: string, n: number, target: TargetName) =>
    rows.find((r) => r.mode === mode && r.concurrency === n && r.target === target)
  const out: Array<Check> = []
  for (const scenario of SCENARIOS) {
    const edge = row(scenario.mode, scenario.concurrency, "edge")
    const baseline = row(scenario.mode, scenario.concurrency, "baseline")
    if (edge === undefined || baseline === undefined) continue
    const value = edge.cpuSecondsPer1kTokens / baseline.cpuSecondsPer1kTokens
    out.push({ target: `CPU/token edge ÷ baseline, ${scenario.mode} N=${scenario.concurrency}`, value, limit: 1.5, pass: value <= 1.5 })
  }
  for (const mode of ["burst", "paced"]) {
    const edge16 = row(mode, 16, "edge")
    const direct16 = row(mode, 16, "direct")
    if (edge16 === undefined || direct16 === undefined) continue
    const value = edge16.ttftMs.p99 - direct16.ttftMs.p99
    out.push({ target: `added TTFT p99 ms, ${mode} N=16`, value, limit: 2, pass: value <= 2 })
  }
  const edgeIdle = idle.find((f) => f.relay === "edge")
  if (edgeIdle !== undefined) {
    out.push({ target: "edge RSS KiB per idle stream", value: edgeIdle.kibPerStream, limit: 32, pass: edgeIdle.kibPerStream <= 32 })
  }
  for (const f of idle) {
    out.push({
      target: `${f.relay}: upstream streams left open ${CANCEL_WAIT_MS / 1000} s after clients hung up`,
      value: f.upstreamOpenAfterClose,
      limit: 0,
      pass: f.upstreamOpenAfterClose === 0
    })
  }
  const errors = rows.reduce((total, r) => total + r.errors, 0)
  out.push({ target: "failed or short streams", value: errors, limit: 0, pass: errors === 0 })
  return out
}

const newestProfile = (since: number): string | undefined => {
  try {
    return readdirSync(profileDir)
      .filter((f) => f.endsWith(".cpuprofile"))
      .map((f) => join(profileDir, f))
      .filter((f) => statSync(f).mtimeMs >= since)
      .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0]
  } catch {
    return undefined
  }
}

// ---------------------------------------------------------------------------------------------- main

const main = async () => {
  const started = performance.now()
  setTimeout(() => {
    process.stderr.write(`bench: still running after ${WATCHDOG_MS / 60_000} min, giving up\n`)
    process.exit(1)
  }, WATCHDOG_MS).unref()
  const tmp = mkdtempSync(join(os.tmpdir(), "iop-bench-"))
  const limits = fdLimits("self")
  const loadBefore = os.loadavg()
  log(`iop edge bench — node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? "?"}), load ${loadBefore.map((x) => x.toFixed(2)).join(" ")}`)
  log(`open-files limit of this process (children inherit it): soft ${limits.soft}, hard ${limits.hard}`)
  if (limits.soft < 4 * IDLE_STREAMS) log(`  WARNING: ${IDLE_STREAMS} idle streams need ~${2 * IDLE_STREAMS} sockets in a relay and ${IDLE_STREAMS} here: raise ulimit -n`)
  try {
    const upstream = await startUpstream()
    const configFile = join(tmp, "edge.json")
    writeFileSync(configFile, JSON.stringify(edgeConfig(upstream.port)))
    if (profiling) mkdirSync(profileDir, { recursive: true })

    log(`\n[1/4] throughput: ${TOKENS}-token streams, ${ROUNDS} rounds per configuration (paced: ${PACE_MS} ms between tokens)`)
    const profileSince = Date.now()
    const baseline = await startBaseline(upstream.port)
    const edge = await startEdge(configFile, profiling)
    const rows = await runThroughput(upstream.proc, [upstream, baseline, edge])
    const throughputDone = performance.now()
    let profile: ProfileSummary | undefined
    await stop(edge.proc!, 15_000)
    await stop(baseline.proc!)
    if (profiling) {
      const file = newestProfile(profileSince)
      if (file !== undefined) profile = summarise(file, 30)
    }

    let nats: NatsFigures | undefined
    let natsFailure: string | undefined
    if (!natsEnabled) log("\n[2/4] NATS path: skipped (BENCH_NATS=0)")
    else {
      log(`\n[2/4] NATS path: edge → nats-server → node vs the edge's embedded node (${NATS_SERVER}, fresh processes)`)
      const inProcess = await startEdge(configFile, false)
      try {
        nats = await measureNats({
          upstreamPort: upstream.port,
          inProcess: { port: inProcess.port, proc: inProcess.proc! },
          startEdge: async (file) => {
            const edge = await startEdge(file, false)
            return { port: edge.port, proc: edge.proc! }
          },
          edgeMain,
          nodeFlags: agentFlags,
          tmp,
          tokens: TOKENS,
          log
        })
      } catch (error) {
        // Keep the rest of the report, as for the idle streams.
        natsFailure = error instanceof Error ? error.message : String(error)
        log(`  NATS path: FAILED: ${natsFailure}`)
      } finally {
        await stop(inProcess.proc!)
      }
    }
    const natsDone = performance.now()

    log(`\n[3/4] memory: ${IDLE_STREAMS} open idle streams through each relay (fresh processes)`)
    const idle: Array<IdleFigures> = []
    const idleFailures: Array<{ readonly relay: string; readonly error: string }> = []
    for (const start of [() => startBaseline(upstream.port), () => startEdge(configFile, false)]) {
      const relay = await start()
      try {
        const figures = await measureIdle(relay, upstream.proc)
        idle.push(figures)
        log(`  ${relay.name}: ${fixed(figures.kibPerStream, 1)} KiB/stream`)
      } catch (error) {
        // Keep the rest of the report: a relay that dies here is a finding, not a reason to lose the run.
        const message = error instanceof Error ? error.message : String(error)
        idleFailures.push({ relay: relay.name, error: message })
        log(`  ${relay.name}: FAILED: ${message}`)
      } finally {
        await stop(relay.proc!)
      }
    }
    await stop(upstream.proc)
    const memoryDone = performance.now()
    const natsS = (natsDone - throughputDone) / 1000

    log("\n[4/4] filters (in this process)")
    const toolText: ToolTextFigures = measureToolTextThroughput()
    const reasoning: ReasoningFiltersFigures = measureReasoningFilters()
    const phases = {
      throughputS: (throughputDone - started) / 1000,
      natsS,
      memoryS: (memoryDone - natsDone) / 1000,
      filtersS: (performance.now() - memoryDone) / 1000
    }

    const results = [
      ...checks(rows, idle),
      ...idleFailures.map((f) => ({ target: `${f.relay}: held ${IDLE_STREAMS} idle streams`, value: Number.NaN, limit: 0, pass: false })),
      ...(nats === undefined ? [] : natsChecks(nats)),
      ...(nats === undefined ? [] : (() => {
        const errors = nats.rows.reduce((total, r) => total + r.errors, 0)
        return [{ target: "NATS phase: failed or short streams", value: errors, limit: 0, pass: errors === 0 }]
      })()),
      ...(natsFailure === undefined ? [] : [{ target: "NATS path ran", value: Number.NaN, limit: 0, pass: false }])
    ]
    log("\n== relay throughput, CPU and time to first token ==")
    log("(relay CPU = utime+stime of the relay process from /proc; added = relay TTFT − direct TTFT at the same percentile;")
    log(" reads/stream = response body reads per stream at the client: ~260 means one write per SSE event)")
    log(throughputTable(rows))
    if (nats !== undefined) {
      log("\n== NATS path: edge → nats-server → node vs edge with embedded node (in-process), same run ==")
      log("(CPU = utime+stime from /proc of edge (in-process) or edge + node (NATS), per 1k tokens; CPU ratio = NATS ÷ in-process;")
      log(" nats-server CPU apart; added = NATS − in-process at the same percentile; n = TTFT samples)")
      log(natsTable(nats))
    }
    if (natsFailure !== undefined) log(`\nNATS path: FAILED: ${natsFailure}`)
    log(`\n== memory per open idle stream (${IDLE_STREAMS} streams held open, upstream stalled after the first token) ==`)
    log(idleTable(idle))
    for (const f of idleFailures) log(`${f.relay}: FAILED: ${f.error}`)
    log(`(each held stream costs a relay 2 sockets; the bench process and the upstream hold ${IDLE_STREAMS} more each)`)
    log("\n== filters ==")
    log(table(
      ["filter", "MB/s", "time(2 MB) ÷ time(1 MB)"],
      [
        ["tool-text hold-back (1 MB)", fixed(toolText.mb1.mbPerSec, 1), fixed(toolText.ratio, 2)],
        ["tool-text hold-back (2 MB)", fixed(toolText.mb2.mbPerSec, 1), ""],
        ["sentinel", fixed(reasoning.sentinel.mbPerSec, 1), ""],
        ["think", fixed(reasoning.think.mbPerSec, 1), ""],
        ["sentinel → think", "", fixed(reasoning.ratio2to1, 2)]
      ]
    ))
    log("\n== targets ==")
    log(table(
      ["target", "value", "limit", ""],
      results.map((c: Check) => [c.target, fixed(c.value, 2), `${c.atLeast === true ? "≥" : "≤"} ${c.limit}`, c.pass ? "PASS" : "MISS"])
    ))
    if (profile !== undefined) {
      log(`\n== edge CPU profile (throughput runs) ==\n${formatSummary(profile)}`)
      // Effect runs fibers from its scheduler, so the edge's own frames are rarely on the stack: cost per operator instead.
      log("\n== Effect Stream operators, CPU µs per element (bench/operators.ts) ==")
      log(execFileSync(process.execPath, ["--expose-gc", resolve(here, "operators.js"), "256"], { encoding: "utf8" }).trimEnd())
      log(`\n== edge planes, paced upstream, 16 streams, in-process (bench/ladder.ts) ==`)
      log(execFileSync(process.execPath, [resolve(here, "ladder.js"), "paced", "16", "2500"], { encoding: "utf8" }).trimEnd())
    }

    const seconds = (performance.now() - started) / 1000
    const file = join(root, "bench", "results.json")
    writeFileSync(
      file,
      `${JSON.stringify(
        {
          date: new Date().toISOString(),
          node: process.version,
          cpus: os.cpus().length,
          loadavg: { before: loadBefore, after: os.loadavg() },
          seconds,
          phases,
          settings: { tokens: TOKENS, rounds: ROUNDS, runMs: RUN_MS, paceMs: PACE_MS, idleStreams: IDLE_STREAMS, fdLimit: limits },
          throughput: rows,
          nats: nats ?? (natsFailure === undefined ? "skipped" : { failed: natsFailure }),
          idle,
          idleFailures,
          filters: { toolText, reasoning },
          targets: results,
          profile
        },
        (_, value) => (typeof value === "number" && !Number.isFinite(value) ? null : value),
        2
      )}\n`
    )
    log(
      `\n${fixed(seconds, 0)} s (throughput ${fixed(phases.throughputS, 0)} s, NATS ${fixed(phases.natsS, 0)} s, memory ${fixed(phases.memoryS, 0)} s, ` +
        `filters ${fixed(phases.filtersS, 0)} s); load average now ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}; wrote ${file}`
    )
  } finally {
    await killAll()
    rmSync(tmp, { recursive: true, force: true })
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  process.exitCode = 1
})
