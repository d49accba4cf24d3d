/**
 * `npm run bench`: the edge relaying a fast fake upstream, against a minimal
 * node:http relay ("baseline", bench/baselineProxy.ts) measured in the same run
 * (the machine is small and noisy, so only ratios to that baseline mean much):
 *
 * 1. throughput: CPU per 1k tokens and TTFT, burst N=1/16/64 and paced (5 ms a
 *    token) N=16, its clients in lock-step and staggered, each relay and the
 *    upstream direct; then non-stream requests
 *    (`stream: false`, 256 tokens, 16 clients): CPU ms per request.
 * 2. dialects: the same edge at burst N=16 per API; Responses' and Messages' CPU/token, tok/s, TTFT ÷ Chat Completions'.
 * 3. the NATS path (edge → nats-server → node) against the edge's embedded node
 *    (bench/nats.ts); `BENCH_NATS=0` skips it.
 * 4. memory per idle open stream (1000 held on a stalled upstream), then all
 *    1000 clients hang up in one synchronous loop and the upstream's open
 *    requests are counted 1 s and 3 s later.
 * 5. the filter micro-benchmarks, and the constraint's CPU at the edge: compiling a request's answer grammar
 *    (bench/constraints.ts), µs per request beside the edge's CPU per non-stream request of phase 1.
 *
 * Prints the tables, a summary (edge next to the relay) and the bars
 * (PASS/MISS), and writes `bench/results.json`. Exits 0 when bars are missed
 * (it is a measurement) and 1 when the measurement failed: a phase threw, a
 * request failed or came back short, fewer than 1000 idle streams opened, or a
 * bar's figure could not be computed.
 *
 * Environment: `BENCH_QUICK=1` — one round, every run and warm-up at 30 % of
 * its length, for checking that the bench works (figures are noisier; the idle
 * phase still holds 1000 streams). `BENCH_PROFILE=1` also CPU-profiles the
 * edge during the throughput runs and prints where its time goes.
 * `BENCH_NATS=0` skips the NATS phase.
 */
import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { type Dialect, DIALECTS, type IdleStreams, openIdleStreams, requestBody, runLoad } from "./load.js"
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
import { completionText } from "./fakeText.js"
import { measureNats, NATS_SERVER, type NatsFigures, natsHeadline, natsTable } from "./nats.js"
import { formatSummary, type ProfileSummary, summarise } from "./profile.js"
import { measureReasoningFilters, type ReasoningFiltersFigures } from "./reasoningFilters.js"
import { fixed, percentile, table } from "./table.js"
import { measureToolTextThroughput, type ToolTextFigures } from "./toolText.js"
import { type ConstraintFigures, constraintProblems, constraintTable, measureConstraintCompile } from "./constraints.js"

const quick = process.env["BENCH_QUICK"] === "1"
/** Every run's and warm-up's length is multiplied by this. */
const SCALE = quick ? 0.3 : 1
const scaled = (ms: number) => Math.round(ms * SCALE)
const TOKENS = 256
const ROUNDS = quick ? 1 : 2
const RUN_MS = scaled(2_000)
/** Upstream delay between tokens in the paced scenario: 200 tokens/s per stream, a fast model. */
const PACE_MS = 5
const WARMUP_MS = scaled(1_000)
/** Non-stream requests: this many closed-loop clients for RUN_MS per round. */
const NON_STREAM_CLIENTS = 16
/** The dialects phase: this many closed-loop burst clients per dialect for RUN_MS per round. */
const DIALECT_CLIENTS = 16
const IDLE_STREAMS = 1_000
/** When the upstream's open requests are counted after the idle streams' clients hang up. */
const ABORT_SAMPLES_MS = [1_000, 3_000] as const
/** How long after the hang-up to keep waiting for the upstream to see every request closed (≥ the last sample). */
const CANCEL_WAIT_MS = 10_000
/** The whole bench normally takes about five minutes; past this something hangs: kill everything and fail. */
const WATCHDOG_MS = 9 * 60_000

/** How long a paced stream lasts: TOKENS events PACE_MS apart. */
const PACED_STREAM_MS = TOKENS * PACE_MS

/**
 * Burst: the upstream writes all events at once (a relay slower than that gets them batched per read).
 * Paced: PACE_MS between events, so a relay that keeps up gets one event per read, as from a real model. Its
 * streams all last alike, so its closed-loop clients stay in lock-step: their requests arrive together.
 * Staggered: the same, the clients' first requests spread over one stream's length, so that they arrive apart
 * (as independent callers do) and each TTFT is that request's own.
 */
const SCENARIOS = [
  { mode: "burst", model: "bench", concurrency: 1, durationMs: RUN_MS },
  { mode: "burst", model: "bench", concurrency: 16, durationMs: RUN_MS },
  { mode: "burst", model: "bench", concurrency: 64, durationMs: RUN_MS },
  { mode: "paced", model: "paced", concurrency: 16, durationMs: scaled(3_000) },
  { mode: "staggered", model: "paced", concurrency: 16, durationMs: PACED_STREAM_MS + scaled(3_000), staggerMs: PACED_STREAM_MS }
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
  /** Requests that asked for `stream: false`. */
  readonly jsonRequests: number
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
  durationMs: number = scenario.durationMs,
  dialect: Dialect = "chat_completions"
): Promise<Sample> => {
  const relay0 = target.proc ? cpuSeconds(target.proc.pid) : 0
  const upstream0 = cpuSeconds(upstream.pid)
  const client0 = process.cpuUsage()
  const result = await runLoad({
    port: target.port,
    body: DIALECTS[dialect].body(scenario.model),
    concurrency: scenario.concurrency,
    durationMs,
    expectTokens: TOKENS,
    dialect,
    ...("staggerMs" in scenario ? { staggerMs: scenario.staggerMs } : {})
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

// ---------------------------------------------------------------------------------------------- non-stream

interface NonStreamSample {
  readonly requests: number
  readonly errors: number
  readonly elapsedMs: number
  readonly relayCpuS: number
  readonly latencies: ReadonlyArray<number>
  /** Upstream requests during the run, and how many of them asked for `stream: false`. */
  readonly upstreamRequests: number
  readonly upstreamJsonRequests: number
  readonly errorSamples: ReadonlyArray<string>
}

interface NonStreamRow {
  readonly target: TargetName
  readonly requestsPerSec: number
  readonly requests: number
  readonly errors: number
  /** CPU ms of the relay process per good request (all rounds pooled); NaN for direct. */
  readonly cpuMsPerRequest: number
  readonly cpuMsPerRequestByRound: ReadonlyArray<number>
  /** Request sent → whole body at the client. */
  readonly latencyMs: { readonly p50: number; readonly p99: number; readonly samples: number }
  /** How the relay asked its upstream: `stream: false`, `stream: true`, or some of each. */
  readonly upstreamAsked: "json" | "stream" | "mixed" | "none"
  readonly errorSamples: ReadonlyArray<string>
}

const nonStreamBody = requestBody("bench", false)
const nonStreamContent = completionText(TOKENS)

const measureNonStream = async (target: Target, upstream: Proc, durationMs: number): Promise<NonStreamSample> => {
  const stats0 = await ask<UpstreamStats>(upstream, "stats")
  const relay0 = target.proc ? cpuSeconds(target.proc.pid) : 0
  const result = await runLoad({
    port: target.port,
    body: nonStreamBody,
    concurrency: NON_STREAM_CLIENTS,
    durationMs,
    expectTokens: TOKENS,
    expectContent: nonStreamContent
  })
  const relayCpuS = target.proc ? cpuSeconds(target.proc.pid) - relay0 : 0
  const stats1 = await ask<UpstreamStats>(upstream, "stats")
  return {
    requests: result.requests,
    errors: result.errors,
    elapsedMs: result.elapsedMs,
    relayCpuS,
    latencies: result.ttfts,
    upstreamRequests: stats1.requests - stats0.requests,
    upstreamJsonRequests: stats1.jsonRequests - stats0.jsonRequests,
    errorSamples: result.errorSamples
  }
}

const toNonStreamRow = (target: TargetName, samples: ReadonlyArray<NonStreamSample>): NonStreamRow => {
  const sum = (f: (s: NonStreamSample) => number) => samples.reduce((total, s) => total + f(s), 0)
  const good = (s: NonStreamSample) => s.requests - s.errors
  const latencies = samples.flatMap((s) => s.latencies).sort((a, b) => a - b)
  const upstreamRequests = sum((s) => s.upstreamRequests)
  const json = sum((s) => s.upstreamJsonRequests)
  return {
    target,
    requestsPerSec: sum(good) / (sum((s) => s.elapsedMs) / 1000),
    requests: sum((s) => s.requests),
    errors: sum((s) => s.errors),
    cpuMsPerRequest: target === "direct" ? Number.NaN : (sum((s) => s.relayCpuS) / sum(good)) * 1000,
    cpuMsPerRequestByRound: target === "direct" ? [] : samples.map((s) => (s.relayCpuS / good(s)) * 1000),
    latencyMs: { p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), samples: latencies.length },
    upstreamAsked: upstreamRequests === 0 ? "none" : json === upstreamRequests ? "json" : json === 0 ? "stream" : "mixed",
    errorSamples: [...new Set(samples.flatMap((s) => s.errorSamples))]
  }
}

const runNonStream = async (upstream: Proc, targets: ReadonlyArray<Target>): Promise<ReadonlyArray<NonStreamRow>> => {
  // Two seconds each: the JSON path's code is not warm from the streamed runs, and the bar is per request in steady
  // state (the first second of a cold path measures the JIT, 0.9–1.3 ms here, not the request).
  for (const target of targets) await measureNonStream(target, upstream, WARMUP_MS * 2)
  const samples = new Map<TargetName, Array<NonStreamSample>>()
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? targets : [...targets].reverse()
    for (const target of order) {
      const sample = await measureNonStream(target, upstream, RUN_MS)
      samples.set(target.name, [...(samples.get(target.name) ?? []), sample])
      log(
        `  round ${round + 1} non-stream N=${NON_STREAM_CLIENTS} ${target.name}: ` +
          `${fixed(sample.requests / (sample.elapsedMs / 1000), 0)} req/s` +
          (target.name === "direct" ? "" : `, ${fixed((sample.relayCpuS / Math.max(1, sample.requests - sample.errors)) * 1000, 2)} ms CPU/request`) +
          (sample.errors > 0 ? `, ${sample.errors} errors (${sample.errorSamples.join("; ")})` : "")
      )
    }
  }
  return TARGETS.map((name) => toNonStreamRow(name, samples.get(name) ?? []))
}

// ---------------------------------------------------------------------------------------------- dialects

const DIALECT_ORDER = ["chat_completions", "responses", "messages"] as const satisfies ReadonlyArray<Dialect>
const DIALECT_SCENARIO = { mode: "burst", model: "bench", concurrency: DIALECT_CLIENTS, durationMs: RUN_MS } as const

/** A throughput row of the edge (burst N=16) in one dialect, with its figures ÷ Chat Completions'. */
interface DialectRow extends Row {
  readonly dialect: Dialect
  /** This dialect's figure ÷ Chat Completions' in the same run (1 for chat_completions itself). */
  readonly cpuPer1kRatio: number
  readonly cpuPer1kRatioByRound: ReadonlyArray<number>
  readonly tokensPerSecRatio: number
  readonly ttftP50Ratio: number
}

/** The edge at burst N=16 in each dialect, rounds alternating the order; its CPU per token ÷ Chat Completions'. */
const runDialects = async (upstream: Proc, edge: Target): Promise<ReadonlyArray<DialectRow>> => {
  // The Responses and Messages paths are cold (Chat Completions is warm from ~20 s of throughput runs): each is
  // warmed for 2 s, or the first rounds measure V8 still compiling their renderers (half a second of warm-up
  // had them ~1.3× Chat Completions in one run and ~1.0× in the next).
  for (const dialect of DIALECT_ORDER) await measure(edge, upstream, DIALECT_SCENARIO, -1, WARMUP_MS * 2, dialect)
  const samples = new Map<Dialect, Array<Sample>>()
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? DIALECT_ORDER : [...DIALECT_ORDER].reverse()
    for (const dialect of order) {
      const sample = await measure(edge, upstream, DIALECT_SCENARIO, round, RUN_MS, dialect)
      samples.set(dialect, [...(samples.get(dialect) ?? []), sample])
      log(
        `  round ${round + 1} burst N=${DIALECT_CLIENTS} ${dialect}: ${fixed(sample.tokens / (sample.elapsedMs / 1000), 0)} tok/s, ` +
          `${fixed((sample.relayCpuS / sample.tokens) * 1e6, 2)} ms CPU/1k tok` +
          (sample.errors > 0 ? `, ${sample.errors} errors (${sample.errorSamples.join("; ")})` : "")
      )
    }
  }
  const rows = DIALECT_ORDER.map((dialect) => ({ dialect, row: toRow(DIALECT_SCENARIO, "edge", samples.get(dialect) ?? []) }))
  const chat = rows[0]!.row
  return rows.map(({ dialect, row }) => ({
    ...row,
    dialect,
    cpuPer1kRatio: row.cpuSecondsPer1kTokens / chat.cpuSecondsPer1kTokens,
    cpuPer1kRatioByRound: row.cpuPer1kByRound.map((x, i) => x / (chat.cpuPer1kByRound[i] ?? Number.NaN)),
    tokensPerSecRatio: row.tokensPerSec / chat.tokensPerSec,
    ttftP50Ratio: row.ttftMs.p50 / chat.ttftMs.p50
  }))
}

const dialectRatio = (rows: ReadonlyArray<DialectRow> | undefined, dialect: Dialect): number =>
  rows?.find((r) => r.dialect === dialect)?.cpuPer1kRatio ?? Number.NaN

const dialectsTable = (rows: ReadonlyArray<DialectRow>): string =>
  table(
    [
      "dialect",
      "tok/s",
      "edge CPU ms/1k tok",
      ...(ROUNDS > 1 ? ["(by round)"] : []),
      `CPU ÷ chat${ROUNDS > 1 ? " (by round)" : ""}`,
      "tok/s ÷ chat",
      "TTFT p50 ms",
      "TTFT p99 ms",
      "TTFT p50 ÷ chat",
      "reads/stream",
      "requests",
      "errors"
    ],
    rows.map((row) => [
      row.dialect,
      fixed(row.tokensPerSec, 0),
      fixed(row.cpuSecondsPer1kTokens * 1000, 2),
      ...(ROUNDS > 1 ? [row.cpuPer1kByRound.map((x) => fixed(x * 1000, 2)).join("/")] : []),
      `${fixed(row.cpuPer1kRatio, 2)}${ROUNDS > 1 ? ` (${row.cpuPer1kRatioByRound.map((x) => fixed(x, 2)).join("/")})` : ""}`,
      fixed(row.tokensPerSecRatio, 2),
      fixed(row.ttftMs.p50, 2),
      fixed(row.ttftMs.p99, 2),
      fixed(row.ttftP50Ratio, 2),
      fixed(row.clientReadsPerStream, 0),
      String(row.requests),
      String(row.errors)
    ])
  )

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
  /** Upstream `stall` requests still open from the warm-up when the 1000 were opened (normally 0). */
  readonly upstreamOpenBefore: number
  readonly upstreamOpenWhileHeld: number
  /** How long the one synchronous loop destroying every client socket took. */
  readonly hangUpLoopMs: number
  /** The upstream's open requests at each of ABORT_SAMPLES_MS after the hang-up, with when it answered. */
  readonly openAfterAbort: ReadonlyArray<{ readonly afterMs: number; readonly answeredAtMs: number; readonly open: number }>
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
  // The warm-up's upstream requests should be gone before the 1000 open, or they count as not cancelled.
  for (const deadline = performance.now() + 5_000; performance.now() < deadline;) {
    await sleep(100)
    if ((await ask<UpstreamStats>(upstream, "stats")).openStalls === 0) break
  }
  const upstreamOpenBefore = (await ask<UpstreamStats>(upstream, "stats")).openStalls
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
    const hangUpLoopMs = streams.close()
    streams = undefined
    // Poll every 100 ms (at fixed offsets from the hang-up, so that ABORT_SAMPLES_MS are exact ticks) until no
    // upstream request is open, or CANCEL_WAIT_MS after the hang-up.
    const openAfterAbort: Array<{ afterMs: number; answeredAtMs: number; open: number }> = []
    let upstreamOpenAfterClose = upstreamOpenWhileHeld
    let cancelPropagationMs = Number.NaN
    for (let tick = 1; ; tick++) {
      const due = tick * 100
      await sleep(Math.max(0, hungUp + due - performance.now()))
      upstreamOpenAfterClose = (await ask<UpstreamStats>(upstream, "stats")).openStalls
      const answeredAtMs = performance.now() - hungUp
      if ((ABORT_SAMPLES_MS as ReadonlyArray<number>).includes(due)) {
        openAfterAbort.push({ afterMs: due, answeredAtMs, open: upstreamOpenAfterClose })
      }
      if (upstreamOpenAfterClose === 0 && Number.isNaN(cancelPropagationMs)) cancelPropagationMs = answeredAtMs
      // Once at 0 nothing can reopen (the clients are gone): the later samples are 0 too.
      if (upstreamOpenAfterClose === 0) {
        for (const afterMs of ABORT_SAMPLES_MS) {
          if (!openAfterAbort.some((x) => x.afterMs === afterMs)) openAfterAbort.push({ afterMs, answeredAtMs, open: 0 })
        }
        break
      }
      if (due >= CANCEL_WAIT_MS) {
        cancelPropagationMs = answeredAtMs
        break
      }
    }
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
      upstreamOpenBefore,
      upstreamOpenWhileHeld,
      hangUpLoopMs,
      openAfterAbort,
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
      `CPU ratio vs baseline${ROUNDS > 1 ? " (by round)" : ""}`,
      "TTFT p50 ms",
      "TTFT p99 ms",
      "added p50 ms (− direct)",
      "added p99 ms (− direct)",
      "reads/stream",
      "errors"
    ],
    rows.map((row) => {
      const baseline = find(row, "baseline")
      const direct = find(row, "direct")
      const ratio = row.target === "edge" && baseline !== undefined
        ? `${fixed(row.cpuSecondsPer1kTokens / baseline.cpuSecondsPer1kTokens, 2)}${
          ROUNDS > 1
            ? ` (${row.cpuPer1kByRound.map((x, i) => fixed(x / (baseline.cpuPer1kByRound[i] ?? Number.NaN), 2)).join("/")})`
            : ""
        }`
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

/** CPU ms a relay spent per streamed 256-token request at burst N=16 (what a non-stream request is held to). */
const streamedCpuMsPerRequest = (rows: ReadonlyArray<Row>, target: TargetName): number => {
  const row = rows.find((r) => r.mode === "burst" && r.concurrency === 16 && r.target === target)
  return row === undefined ? Number.NaN : row.cpuSecondsPer1kTokens * TOKENS
}

const nonStreamTable = (rows: ReadonlyArray<NonStreamRow>, streamed: ReadonlyArray<Row>): string => {
  const baseline = rows.find((r) => r.target === "baseline")
  const direct = rows.find((r) => r.target === "direct")
  return table(
    [
      "through",
      "req/s",
      "relay CPU ms/request",
      ROUNDS > 1 ? "(by round)" : "",
      "÷ baseline",
      "streamed ms/request",
      "non-stream ÷ streamed",
      "latency p50 ms",
      "latency p99 ms",
      "added p50 ms (− direct)",
      "upstream asked",
      "errors"
    ],
    rows.map((row) => {
      const relay = row.target !== "direct"
      const streamedMs = streamedCpuMsPerRequest(streamed, row.target)
      return [
        row.target,
        fixed(row.requestsPerSec, 0),
        relay ? fixed(row.cpuMsPerRequest, 3) : "",
        relay && ROUNDS > 1 ? row.cpuMsPerRequestByRound.map((x) => fixed(x, 3)).join("/") : "",
        row.target === "edge" && baseline !== undefined ? fixed(row.cpuMsPerRequest / baseline.cpuMsPerRequest, 2) : "",
        relay ? fixed(streamedMs, 3) : "",
        relay ? fixed(row.cpuMsPerRequest / streamedMs, 2) : "",
        fixed(row.latencyMs.p50, 2),
        fixed(row.latencyMs.p99, 2),
        relay && direct !== undefined ? fixed(row.latencyMs.p50 - direct.latencyMs.p50, 2) : "",
        row.upstreamAsked === "json" ? "stream: false" : row.upstreamAsked === "stream" ? "stream: true" : row.upstreamAsked,
        String(row.errors)
      ]
    })
  )
}

const openAt = (f: IdleFigures | undefined, afterMs: number): number =>
  f?.openAfterAbort.find((x) => x.afterMs === afterMs)?.open ?? Number.NaN

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
      "fd limit"
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
      `${f.fdLimit.soft}/${f.fdLimit.hard}`
    ])
  )

const abortTable = (figures: ReadonlyArray<IdleFigures>): string =>
  table(
    [
      "relay",
      "clients hung up",
      "hang-up loop ms",
      "upstream open at hang-up",
      ...ABORT_SAMPLES_MS.map((ms) => `open ${ms / 1000} s after`),
      "all closed after"
    ],
    figures.map((f) => [
      f.relay,
      String(f.opened),
      fixed(f.hangUpLoopMs, 1),
      // Left over from the warm-up's 50 (which had 5 s to close) when the 1000 opened: counted in every figure.
      `${f.upstreamOpenWhileHeld}${f.upstreamOpenBefore > 0 ? ` (${f.upstreamOpenBefore} from the warm-up)` : ""}`,
      ...ABORT_SAMPLES_MS.map((ms) => {
        const sample = f.openAfterAbort.find((x) => x.afterMs === ms)
        // The count is as of when the upstream answered: say so when that was late.
        return sample === undefined
          ? "—"
          : `${sample.open}${sample.open > 0 && sample.answeredAtMs > ms + 150 ? ` (at ${fixed(sample.answeredAtMs / 1000, 2)} s)` : ""}`
      }),
      f.upstreamOpenAfterClose === 0
        ? `${fixed(f.cancelPropagationMs / 1000, 1)} s`
        : `${f.upstreamOpenAfterClose} still open at ${fixed(f.cancelPropagationMs / 1000, 1)} s`
    ])
  )

interface Bar {
  readonly bar: string
  readonly value: number
  /** The same figure for the baseline relay, where it has one. */
  readonly relay: number
  readonly limit: number
  /** The limit is a floor (≥), not a ceiling. */
  readonly atLeast?: boolean
  /** Decimals to print (2 unless said). */
  readonly digits?: number
  readonly pass: boolean
}

const bar = (b: Omit<Bar, "pass">): Bar => ({
  ...b,
  pass: Number.isFinite(b.value) && Number.isFinite(b.limit) && (b.atLeast === true ? b.value >= b.limit : b.value <= b.limit)
})

interface Report {
  readonly rows: ReadonlyArray<Row>
  readonly nonStream: ReadonlyArray<NonStreamRow>
  /** Undefined when the phase failed. */
  readonly dialects: ReadonlyArray<DialectRow> | undefined
  readonly idle: ReadonlyArray<IdleFigures>
  readonly nats: NatsFigures | undefined
  /** Undefined until the filters phase ran. */
  readonly toolText?: ToolTextFigures
  readonly constraints?: ConstraintFigures
}

const rowOf = (rows: ReadonlyArray<Row>, mode: string, n: number, target: TargetName) =>
  rows.find((r) => r.mode === mode && r.concurrency === n && r.target === target)

const cpuRatio = (rows: ReadonlyArray<Row>, mode: string, n: number): number =>
  (rowOf(rows, mode, n, "edge")?.cpuSecondsPer1kTokens ?? Number.NaN) /
  (rowOf(rows, mode, n, "baseline")?.cpuSecondsPer1kTokens ?? Number.NaN)

/** A relay's TTFT at 16 streams less the upstream's own (direct) at the same percentile. */
const addedTtft = (
  rows: ReadonlyArray<Row>,
  target: TargetName,
  p: "p50" | "p99",
  mode: Scenario["mode"] = "paced"
): number =>
  (rowOf(rows, mode, 16, target)?.ttftMs[p] ?? Number.NaN) - (rowOf(rows, mode, 16, "direct")?.ttftMs[p] ?? Number.NaN)

/** The headline figures, edge next to the relay. */
const summaryTable = (r: Report): string => {
  const edgeIdle = r.idle.find((f) => f.relay === "edge")
  const baseIdle = r.idle.find((f) => f.relay === "baseline")
  const ns = (target: TargetName) => r.nonStream.find((x) => x.target === target)?.cpuMsPerRequest ?? Number.NaN
  const cpu = (mode: string, n: number, target: TargetName) =>
    (rowOf(r.rows, mode, n, target)?.cpuSecondsPer1kTokens ?? Number.NaN) * 1000
  const nats = r.nats === undefined ? undefined : natsHeadline(r.nats)
  const line = (figure: string, edge: number, relay: number, digits = 2, ratio = true) => [
    figure,
    fixed(edge, digits),
    fixed(relay, digits),
    ratio ? fixed(edge / relay, 2) : ""
  ]
  return table(["figure", "edge", "baseline relay", "edge ÷ relay"], [
    ...[1, 16, 64].map((n) => line(`CPU ms per 1k tokens, burst (saturated) N=${n}`, cpu("burst", n, "edge"), cpu("burst", n, "baseline"))),
    line("CPU ms per 1k tokens, paced N=16", cpu("paced", 16, "edge"), cpu("paced", 16, "baseline")),
    line("KiB RSS per idle stream (after GC)", edgeIdle?.kibPerStream ?? Number.NaN, baseIdle?.kibPerStream ?? Number.NaN, 1),
    line("added TTFT p50 ms, burst (saturated) N=16 (− direct)", addedTtft(r.rows, "edge", "p50", "burst"), addedTtft(r.rows, "baseline", "p50", "burst"), 2, false),
    line("added TTFT p50 ms, paced N=16 (− direct)", addedTtft(r.rows, "edge", "p50"), addedTtft(r.rows, "baseline", "p50"), 2, false),
    line("added TTFT p99 ms, paced N=16 (− direct)", addedTtft(r.rows, "edge", "p99"), addedTtft(r.rows, "baseline", "p99"), 2, false),
    line("added TTFT p50 ms, paced N=16, staggered (− direct)", addedTtft(r.rows, "edge", "p50", "staggered"), addedTtft(r.rows, "baseline", "p50", "staggered"), 2, false),
    line("added TTFT p99 ms, paced N=16, staggered (− direct)", addedTtft(r.rows, "edge", "p99", "staggered"), addedTtft(r.rows, "baseline", "p99", "staggered"), 2, false),
    ...ABORT_SAMPLES_MS.map((ms) =>
      line(`upstream requests open ${ms / 1000} s after ${IDLE_STREAMS} simultaneous aborts`, openAt(edgeIdle, ms), openAt(baseIdle, ms), 0, false)
    ),
    line(`CPU ms per non-stream request (${TOKENS} tokens)`, ns("edge"), ns("baseline"), 3),
    line(`CPU ms per streamed request (${TOKENS} tokens, burst N=16)`, streamedCpuMsPerRequest(r.rows, "edge"), streamedCpuMsPerRequest(r.rows, "baseline"), 3),
    ...(r.constraints?.rows ?? []).map((c) =>
      [`CPU ms to compile the answer's grammar: ${c.name}, ${c.choice}`, fixed(c.usPerRequest / 1000, 3), "", ""]
    ),
    [`responses ÷ chat CPU/token, burst N=${DIALECT_CLIENTS}`, fixed(dialectRatio(r.dialects, "responses"), 2), "", ""],
    [`messages ÷ chat CPU/token, burst N=${DIALECT_CLIENTS}`, fixed(dialectRatio(r.dialects, "messages"), 2), "", ""],
    ...(nats === undefined ? [] : [
      ["NATS tok/s ÷ in-process tok/s, burst N=16", fixed(nats.burst16Ratio, 2), "", ""],
      ["NATS added TTFT p50 / p99 ms, paced N=16 (− in-process)", `${fixed(nats.paced16AddedTtftP50Ms, 2)} / ${fixed(nats.paced16AddedTtftP99Ms, 2)}`, "", ""]
    ])
  ])
}

const bars = (r: Report): ReadonlyArray<Bar> => {
  const edgeIdle = r.idle.find((f) => f.relay === "edge")
  const baseIdle = r.idle.find((f) => f.relay === "baseline")
  const last = ABORT_SAMPLES_MS[ABORT_SAMPLES_MS.length - 1] ?? 0
  const ns = (target: TargetName) => r.nonStream.find((x) => x.target === target)?.cpuMsPerRequest ?? Number.NaN
  return [
    ...[16, 64].map((n) =>
      bar({ bar: `CPU/token edge ÷ relay, saturated (burst N=${n})`, value: cpuRatio(r.rows, "burst", n), relay: Number.NaN, limit: 1.3 })
    ),
    bar({ bar: "CPU/token edge ÷ relay, paced N=16", value: cpuRatio(r.rows, "paced", 16), relay: Number.NaN, limit: 1.6 }),
    bar({
      bar: "KiB RSS per idle stream",
      value: edgeIdle?.kibPerStream ?? Number.NaN,
      relay: baseIdle?.kibPerStream ?? Number.NaN,
      limit: 96,
      digits: 1
    }),
    // Issue 19's: at 16 saturated streams, twice the relay's own added TTFT in the same run (the machine's noise
    // moves both), at least 1 ms (the relay's figure can be ≤ 0 from the direct run's noise).
    bar({
      bar: "added TTFT p50 ms, burst (saturated) N=16 (− direct) ≤ max(2 × relay's, 1 ms)",
      value: addedTtft(r.rows, "edge", "p50", "burst"),
      relay: addedTtft(r.rows, "baseline", "p50", "burst"),
      limit: Math.max(2 * addedTtft(r.rows, "baseline", "p50", "burst"), 1)
    }),
    // Issue 9's, at 16 paced streams. The fake upstream paces every stream alike, so the closed-loop clients stay in
    // lock-step: their next requests reach the edge in one poll phase, and undici writes a request on a reused
    // idle socket only in the check phase after it (it first reads what the socket may have pending,
    // GHSA-35p6-xmwp-9g52), so each first token there waits for all 16 requests' handling (~0.3 ms each), where
    // the relay's `http.request` writes at once. The figure is that batch, not a request's own latency.
    bar({
      bar: "added TTFT p50 ms, paced N=16 (− direct)",
      value: addedTtft(r.rows, "edge", "p50"),
      relay: addedTtft(r.rows, "baseline", "p50"),
      limit: 10
    }),
    bar({
      bar: `upstreams open ${last / 1000} s after ${IDLE_STREAMS} simultaneous aborts`,
      value: openAt(edgeIdle, last),
      relay: openAt(baseIdle, last),
      limit: 0,
      digits: 0
    }),
    bar({
      bar: "NATS tok/s ÷ in-process, burst N=16",
      value: r.nats === undefined ? Number.NaN : natsHeadline(r.nats).burst16Ratio,
      relay: Number.NaN,
      limit: 0.8,
      atLeast: true
    }),
    bar({
      bar: `non-stream CPU ms/request (${TOKENS} tokens, N=16)`,
      value: ns("edge"),
      relay: ns("baseline"),
      limit: 0.5
    }),
    bar({
      bar: "tool-call hold-back, every family ÷ the five of before, CPU per token on plain text",
      value: r.toolText?.plain.ratio ?? Number.NaN,
      relay: Number.NaN,
      limit: 1.15
    }),
    // The worse of the two ratios (NaN, no figure, when either is missing).
    bar({
      bar: "dialects cost the same per token as chat completions",
      value: Math.max(dialectRatio(r.dialects, "responses"), dialectRatio(r.dialects, "messages")),
      relay: Number.NaN,
      limit: 1.15
    })
  ]
}

const barsTable = (list: ReadonlyArray<Bar>): string =>
  table(
    ["bar", "edge", "limit", "baseline relay", ""],
    list.map((b) => [
      b.bar,
      fixed(b.value, b.digits ?? 2),
      `${b.atLeast === true ? "≥" : "≤"} ${fixed(b.limit, b.digits ?? 2)}`,
      Number.isFinite(b.relay) ? fixed(b.relay, b.digits ?? 2) : "",
      Number.isFinite(b.value) ? (b.pass ? "PASS" : "MISS") : "NO FIGURE"
    ])
  )

/** What makes the measurement itself fail (exit 1), as opposed to a bar missed. */
const problems = (
  r: Report,
  list: ReadonlyArray<Bar>,
  failures: ReadonlyArray<string>
): ReadonlyArray<string> => {
  const out = [...failures]
  for (const row of r.rows) {
    if (row.errors > 0) out.push(`${row.mode} N=${row.concurrency} ${row.target}: ${row.errors} failed or short streams (${row.errorSamples.join("; ")})`)
  }
  for (const row of r.nonStream) {
    if (row.errors > 0) out.push(`non-stream ${row.target}: ${row.errors} failed requests (${row.errorSamples.join("; ")})`)
  }
  for (const row of r.dialects ?? []) {
    if (row.errors > 0) out.push(`dialect ${row.dialect}: ${row.errors} failed or short streams (${row.errorSamples.join("; ")})`)
  }
  for (const f of r.idle) {
    if (f.opened < IDLE_STREAMS) out.push(`${f.relay}: only ${f.opened} of ${IDLE_STREAMS} idle streams opened`)
  }
  for (const row of r.nats?.rows ?? []) {
    if (row.errors > 0) out.push(`NATS ${row.mode} N=${row.concurrency} ${row.path}: ${row.errors} failed or short streams (${row.errorSamples.join("; ")})`)
  }
  if (r.constraints !== undefined) out.push(...constraintProblems(r.constraints))
  for (const b of list) {
    const skipped = !natsEnabled && b.bar.startsWith("NATS")
    if (!Number.isFinite(b.value) && !skipped) out.push(`no figure for: ${b.bar}`)
  }
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

const main = async (): Promise<number> => {
  const started = performance.now()
  setTimeout(() => {
    process.stderr.write(`bench: still running after ${WATCHDOG_MS / 60_000} min, giving up\n`)
    process.exit(1)
  }, WATCHDOG_MS).unref()
  const tmp = mkdtempSync(join(os.tmpdir(), "iop-bench-"))
  const limits = fdLimits("self")
  const loadBefore = os.loadavg()
  log(`iop edge bench — node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? "?"}), load ${loadBefore.map((x) => x.toFixed(2)).join(" ")}`)
  if (quick) log("BENCH_QUICK=1: one round, runs at 30 % of their length — a check that the bench works, not a measurement")
  log(`open-files limit of this process (children inherit it): soft ${limits.soft}, hard ${limits.hard}`)
  if (limits.soft < 4 * IDLE_STREAMS) log(`  WARNING: ${IDLE_STREAMS} idle streams need ~${2 * IDLE_STREAMS} sockets in a relay and ${IDLE_STREAMS} here: raise ulimit -n`)
  try {
    const upstream = await startUpstream()
    const configFile = join(tmp, "edge.json")
    writeFileSync(configFile, JSON.stringify(edgeConfig(upstream.port)))
    if (profiling) mkdirSync(profileDir, { recursive: true })

    log(`\n[1/5] throughput: ${TOKENS}-token streams, ${ROUNDS} round(s) per configuration (paced: ${PACE_MS} ms between tokens), then non-stream requests`)
    const profileSince = Date.now()
    const baseline = await startBaseline(upstream.port)
    const edge = await startEdge(configFile, profiling)
    const rows = await runThroughput(upstream.proc, [upstream, baseline, edge])
    log(`  non-stream: ${NON_STREAM_CLIENTS} clients, ${TOKENS}-token answers (\`stream: false\`)`)
    const nonStream = await runNonStream(upstream.proc, [upstream, baseline, edge])
    const throughputDone = performance.now()

    const failures: Array<string> = []
    log(`\n[2/5] dialects: the same edge, burst N=${DIALECT_CLIENTS}, ${ROUNDS} round(s) each of ${DIALECT_ORDER.join(", ")}`)
    let dialects: ReadonlyArray<DialectRow> | undefined
    let dialectsFailure: string | undefined
    try {
      dialects = await runDialects(upstream.proc, edge)
    } catch (error) {
      dialectsFailure = error instanceof Error ? error.message : String(error)
      failures.push(`dialects: ${dialectsFailure}`)
      log(`  dialects: FAILED: ${dialectsFailure}`)
    }
    const dialectsDone = performance.now()
    let profile: ProfileSummary | undefined
    await stop(edge.proc!, 15_000)
    await stop(baseline.proc!)
    if (profiling) {
      const file = newestProfile(profileSince)
      if (file !== undefined) profile = summarise(file, 30)
    }

    let nats: NatsFigures | undefined
    let natsFailure: string | undefined
    if (!natsEnabled) log("\n[3/5] NATS path: skipped (BENCH_NATS=0)")
    else {
      log(`\n[3/5] NATS path: edge → nats-server → node vs the edge's embedded node (${NATS_SERVER}, fresh processes)`)
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
          log,
          rounds: ROUNDS,
          durationScale: SCALE
        })
      } catch (error) {
        // Keep the rest of the report, as for the idle streams.
        natsFailure = error instanceof Error ? error.message : String(error)
        failures.push(`NATS path: ${natsFailure}`)
        log(`  NATS path: FAILED: ${natsFailure}`)
      } finally {
        await stop(inProcess.proc!)
      }
    }
    const natsDone = performance.now()

    log(`\n[4/5] memory: ${IDLE_STREAMS} open idle streams through each relay (fresh processes), then all hang up at once`)
    const idle: Array<IdleFigures> = []
    const idleFailures: Array<{ readonly relay: string; readonly error: string }> = []
    for (const start of [() => startBaseline(upstream.port), () => startEdge(configFile, false)]) {
      const relay = await start()
      try {
        const figures = await measureIdle(relay, upstream.proc)
        idle.push(figures)
        log(
          `  ${relay.name}: ${fixed(figures.kibPerStream, 1)} KiB/stream; upstream open after hang-up: ` +
            figures.openAfterAbort.map((x) => `${x.open} at ${x.afterMs / 1000} s`).join(", ")
        )
      } catch (error) {
        // Keep the rest of the report: a relay that dies here is a finding, not a reason to lose the run.
        const message = error instanceof Error ? error.message : String(error)
        idleFailures.push({ relay: relay.name, error: message })
        failures.push(`${relay.name}: held ${IDLE_STREAMS} idle streams: ${message}`)
        log(`  ${relay.name}: FAILED: ${message}`)
      } finally {
        await stop(relay.proc!)
      }
    }
    await stop(upstream.proc)
    const memoryDone = performance.now()
    const natsS = (natsDone - dialectsDone) / 1000

    log("\n[5/5] filters and the constraint compile (in this process)")
    const toolText: ToolTextFigures = measureToolTextThroughput()
    const reasoning: ReasoningFiltersFigures = measureReasoningFilters()
    const constraints: ConstraintFigures = measureConstraintCompile()
    const phases = {
      throughputS: (throughputDone - started) / 1000,
      dialectsS: (dialectsDone - throughputDone) / 1000,
      natsS,
      memoryS: (memoryDone - natsDone) / 1000,
      filtersS: (performance.now() - memoryDone) / 1000
    }

    const report: Report = { rows, nonStream, dialects, idle, nats, toolText, constraints }
    const barList = bars(report)
    const trouble = problems(report, barList, failures)

    log("\n== relay throughput, CPU and time to first token ==")
    log("(relay CPU = utime+stime of the relay process from /proc; added = relay TTFT − direct TTFT at the same percentile;")
    log(" reads/stream = response body reads per stream at the client: ~260 means one write per SSE event)")
    log(throughputTable(rows))
    log(`\n== non-stream requests (\`stream: false\`, ${TOKENS} tokens, ${NON_STREAM_CLIENTS} closed-loop clients) ==`)
    log("(relay CPU ms per good request, /proc utime+stime; streamed = the same relay's CPU per 1k tokens at burst N=16 × 0.256;")
    log(" latency = request sent → whole body; upstream asked = what the relay sent upstream: the fake upstream answers both)")
    log(nonStreamTable(nonStream, rows))
    log(`\n== dialects: the same edge at burst N=${DIALECT_CLIENTS}, ${TOKENS}-token streams, each API next to Chat Completions ==`)
    log("(edge CPU = utime+stime of the edge process per 1k relayed tokens; ÷ chat = this dialect's figure ÷ chat_completions' in this run;")
    log(" every stream checked: all its text deltas' characters and its terminal event: [DONE], response.completed, message_stop)")
    if (dialects !== undefined) log(dialectsTable(dialects))
    if (dialectsFailure !== undefined) log(`dialects: FAILED: ${dialectsFailure}`)
    if (nats !== undefined) {
      const h = natsHeadline(nats)
      log("\n== NATS path: edge → nats-server → node vs edge with embedded node (in-process), same run ==")
      log("(CPU = utime+stime from /proc of edge (in-process) or edge + node (NATS), per 1k tokens; CPU ratio = NATS ÷ in-process;")
      log(" nats-server CPU apart; added = NATS − in-process at the same percentile; n = TTFT samples)")
      log(natsTable(nats))
      log(
        `NATS ÷ in-process tok/s at 16 burst streams: ${fixed(h.burst16Ratio, 2)}; ` +
          `added TTFT over NATS at 16 paced streams: p50 ${fixed(h.paced16AddedTtftP50Ms, 2)} ms, p99 ${fixed(h.paced16AddedTtftP99Ms, 2)} ms`
      )
    }
    if (natsFailure !== undefined) log(`\nNATS path: FAILED: ${natsFailure}`)
    log(`\n== memory per open idle stream (${IDLE_STREAMS} streams held open, upstream stalled after the first token) ==`)
    log(idleTable(idle))
    for (const f of idleFailures) log(`${f.relay}: FAILED: ${f.error}`)
    log(`(each held stream costs a relay 2 sockets; the bench process and the upstream hold ${IDLE_STREAMS} more each)`)
    log(`\n== ${IDLE_STREAMS} simultaneous client aborts: the stalled upstream's open requests afterwards ==`)
    log("(every client socket destroyed in one synchronous loop; the upstream's count of open `stall` responses, asked over IPC)")
    log(abortTable(idle))
    log("\n== filters ==")
    log(table(
      ["filter", "MB/s", "time(2 MB) ÷ time(1 MB)"],
      [
        [
          `tool-text hold-back, plain text: every family ${fixed(toolText.plain.allNs, 1)} ns/delta, the five of before ${fixed(toolText.plain.fiveNs, 1)}`,
          "",
          ""
        ],
        ["tool-text hold-back (1 MB)", fixed(toolText.mb1.mbPerSec, 1), fixed(toolText.ratio, 2)],
        ["tool-text hold-back (2 MB)", fixed(toolText.mb2.mbPerSec, 1), ""],
        ["sentinel", fixed(reasoning.sentinel.mbPerSec, 1), ""],
        ["think", fixed(reasoning.think.mbPerSec, 1), ""],
        ["sentinel → think", "", fixed(reasoning.ratio2to1, 2)]
      ]
    ))
    const edgeNonStreamMs = nonStream.find((x) => x.target === "edge")?.cpuMsPerRequest ?? Number.NaN
    log("\n== the constraint at the edge: compiling a request's answer grammar (toolCallGrammar, in this process) ==")
    log(`(µs per compile, best of 7 runs; ÷ = that time over the edge's CPU per non-stream request above, ${fixed(edgeNonStreamMs, 3)} ms;`)
    log(" paid once per constrained request and once per constrained replay, by a provider with constraints: llama.cpp)")
    log(constraintTable(constraints, edgeNonStreamMs))
    if (profile !== undefined) {
      log(`\n== edge CPU profile (throughput and dialects runs) ==\n${formatSummary(profile)}`)
      // Effect runs fibers from its scheduler, so the edge's own frames are rarely on the stack: cost per operator instead.
      log("\n== Effect Stream operators, CPU µs per element (bench/operators.ts) ==")
      log(execFileSync(process.execPath, ["--expose-gc", resolve(here, "operators.js"), "256"], { encoding: "utf8" }).trimEnd())
    }
    log("\n== summary: edge next to the baseline relay, same run ==")
    log(summaryTable(report))
    log("\n== bars ==")
    log(barsTable(barList))
    if (trouble.length > 0) {
      log("\nMEASUREMENT FAILED (the figures above are not to be trusted):")
      for (const p of trouble) log(`  - ${p}`)
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
          settings: {
            quick,
            tokens: TOKENS,
            rounds: ROUNDS,
            runMs: RUN_MS,
            paceMs: PACE_MS,
            nonStreamClients: NON_STREAM_CLIENTS,
            dialectClients: DIALECT_CLIENTS,
            idleStreams: IDLE_STREAMS,
            abortSamplesMs: ABORT_SAMPLES_MS,
            fdLimit: limits
          },
          throughput: rows,
          nonStream,
          dialects: dialects ?? { failed: dialectsFailure },
          nats: nats ?? (natsFailure === undefined ? "skipped" : { failed: natsFailure }),
          idle,
          idleFailures,
          filters: { toolText, reasoning },
          constraints,
          bars: barList,
          problems: trouble,
          profile
        },
        (_, value) => (typeof value === "number" && !Number.isFinite(value) ? null : value),
        2
      )}\n`
    )
    log(
      `\n${fixed(seconds, 0)} s (throughput ${fixed(phases.throughputS, 0)} s, dialects ${fixed(phases.dialectsS, 0)} s, NATS ${fixed(phases.natsS, 0)} s, memory ${fixed(phases.memoryS, 0)} s, ` +
        `filters ${fixed(phases.filtersS, 0)} s); load average now ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}; wrote ${file}`
    )
    return trouble.length > 0 ? 1 : 0
  } finally {
    await killAll()
    rmSync(tmp, { recursive: true, force: true })
  }
}

main().then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
    process.exitCode = 1
  }
)
