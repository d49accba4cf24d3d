/**
 * The NATS path: the same streams through `iop edge` with its embedded node
 * (in-process) and through `iop edge` → nats-server → `iop node` (two more
 * processes), interleaved in the same run against the same fake upstream.
 * CPU is read from /proc for every process of the path: in-process is the edge
 * alone, NATS is edge + node (nats-server reported apart).
 */
import { writeFileSync } from "node:fs"
import { get } from "node:http"
import { connect } from "node:net"
import { join } from "node:path"
import { requestBody, runLoad } from "./load.js"
import { cpuSeconds, freePort, type Proc, sleep, spawnNode, spawnProc, stop } from "./procs.js"
import { fixed, percentile, table } from "./table.js"

export const NATS_SERVER = process.env["BENCH_NATS_SERVER"] ?? "/usr/sbin/nats-server"
const WARMUP_MS = 1_000

/** N = 1 and 16, burst and paced (paced runs longer: a 256-token stream takes ~1.4 s there). */
const SCENARIOS = [
  { mode: "burst", model: "bench", concurrency: 1, durationMs: 1_500 },
  { mode: "burst", model: "bench", concurrency: 16, durationMs: 1_500 },
  { mode: "paced", model: "paced", concurrency: 1, durationMs: 2_500 },
  { mode: "paced", model: "paced", concurrency: 16, durationMs: 2_500 }
] as const
type Scenario = (typeof SCENARIOS)[number]

export type NatsPath = "in-process" | "nats"

interface PathTarget {
  readonly path: NatsPath
  readonly port: number
  /** The processes whose CPU is the path's cost: the edge, plus the node for NATS. */
  readonly procs: ReadonlyArray<Proc>
  /** nats-server, measured apart. */
  readonly broker: Proc | undefined
}

interface Sample {
  readonly tokens: number
  readonly requests: number
  readonly errors: number
  readonly elapsedMs: number
  /** CPU seconds per process of `procs`, in order. */
  readonly cpuS: ReadonlyArray<number>
  readonly brokerCpuS: number
  readonly ttfts: ReadonlyArray<number>
  readonly errorSamples: ReadonlyArray<string>
}

export interface NatsRow {
  readonly mode: Scenario["mode"]
  readonly concurrency: number
  readonly path: NatsPath
  readonly tokensPerSec: number
  readonly requests: number
  readonly errors: number
  /** CPU seconds per 1000 tokens of the path's processes together (edge; edge + node). */
  readonly cpuSecondsPer1kTokens: number
  readonly edgeCpuSecondsPer1kTokens: number
  /** NaN for in-process. */
  readonly nodeCpuSecondsPer1kTokens: number
  readonly natsServerCpuSecondsPer1kTokens: number
  readonly ttftMs: { readonly p50: number; readonly p99: number; readonly samples: number }
  readonly errorSamples: ReadonlyArray<string>
}

export interface NatsComparison {
  readonly mode: Scenario["mode"]
  readonly concurrency: number
  /** tokens/s over NATS ÷ in-process (bar at burst N=16: ≥ 0.8). */
  readonly throughputRatio: number
  /** TTFT p50 over NATS − in-process, ms. */
  readonly addedTtftP50Ms: number
  readonly addedTtftP99Ms: number
  /** CPU per token, edge + node ÷ edge alone. */
  readonly cpuRatio: number
}

export interface NatsFigures {
  readonly settings: { readonly rounds: number; readonly scenarios: ReadonlyArray<Scenario> }
  readonly rows: ReadonlyArray<NatsRow>
  readonly comparisons: ReadonlyArray<NatsComparison>
  readonly seconds: number
}

// ---------------------------------------------------------------------------------------------- processes

const portOpen = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port })
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
  })

const startNatsServer = async (): Promise<{ readonly proc: Proc; readonly port: number }> => {
  const port = await freePort()
  const proc = spawnProc("nats-server", NATS_SERVER, ["-a", "127.0.0.1", "-p", String(port)])
  const deadline = performance.now() + 10_000
  while (performance.now() < deadline) {
    if (proc.child.exitCode !== null) break
    if (await portOpen(port)) return { proc, port }
    await sleep(50)
  }
  throw new Error(`nats-server not listening on ${port}: ${proc.output()}`)
}

const modelIds = (port: number): Promise<ReadonlyArray<string>> =>
  new Promise((resolve) => {
    const req = get({ host: "127.0.0.1", port, path: "/v1/models", agent: false, timeout: 1_000 }, (res) => {
      let body = ""
      res.setEncoding("utf8")
      res.on("data", (t: string) => (body += t))
      res.on("end", () => {
        try {
          const parsed = JSON.parse(body) as { data?: ReadonlyArray<{ id?: string }> }
          resolve((parsed.data ?? []).flatMap((m) => (typeof m.id === "string" ? [m.id] : [])))
        } catch {
          resolve([])
        }
      })
    })
    req.on("timeout", () => req.destroy())
    req.on("error", () => resolve([]))
  })

/** The node logs only warnings (no "node serving over NATS" at warn): ready once the edge lists its models. */
const waitModels = async (edge: Proc, node: Proc, port: number, ids: ReadonlyArray<string>, ms = 20_000) => {
  const deadline = performance.now() + ms
  while (performance.now() < deadline) {
    if (edge.child.exitCode !== null || node.child.exitCode !== null) break
    const listed = await modelIds(port)
    if (ids.every((id) => listed.includes(id))) return
    await sleep(100)
  }
  throw new Error(`edge on ${port} did not list ${ids.join(", ")} within ${ms} ms\nedge: ${edge.output()}\nnode: ${node.output()}`)
}

// ---------------------------------------------------------------------------------------------- measuring

const measure = async (target: PathTarget, scenario: Scenario, durationMs: number, tokens: number): Promise<Sample> => {
  const cpu0 = target.procs.map((p) => cpuSeconds(p.pid))
  const broker0 = target.broker ? cpuSeconds(target.broker.pid) : 0
  const result = await runLoad({
    port: target.port,
    body: requestBody(scenario.model),
    concurrency: scenario.concurrency,
    durationMs,
    expectTokens: tokens
  })
  return {
    tokens: result.tokens,
    requests: result.requests,
    errors: result.errors,
    elapsedMs: result.elapsedMs,
    cpuS: target.procs.map((p, i) => cpuSeconds(p.pid) - (cpu0[i] ?? 0)),
    brokerCpuS: target.broker ? cpuSeconds(target.broker.pid) - broker0 : 0,
    ttfts: result.ttfts,
    errorSamples: result.errorSamples
  }
}

const toRow = (scenario: Scenario, path: NatsPath, samples: ReadonlyArray<Sample>): NatsRow => {
  const sum = (f: (s: Sample) => number) => samples.reduce((total, s) => total + f(s), 0)
  const tokens = sum((s) => s.tokens)
  const per1k = (cpu: number) => (cpu / tokens) * 1000
  const ttfts = samples.flatMap((s) => s.ttfts).sort((a, b) => a - b)
  return {
    mode: scenario.mode,
    concurrency: scenario.concurrency,
    path,
    tokensPerSec: tokens / (sum((s) => s.elapsedMs) / 1000),
    requests: sum((s) => s.requests),
    errors: sum((s) => s.errors),
    cpuSecondsPer1kTokens: per1k(sum((s) => s.cpuS.reduce((a, b) => a + b, 0))),
    edgeCpuSecondsPer1kTokens: per1k(sum((s) => s.cpuS[0] ?? 0)),
    nodeCpuSecondsPer1kTokens: path === "nats" ? per1k(sum((s) => s.cpuS[1] ?? 0)) : Number.NaN,
    natsServerCpuSecondsPer1kTokens: path === "nats" ? per1k(sum((s) => s.brokerCpuS)) : Number.NaN,
    ttftMs: { p50: percentile(ttfts, 0.5), p99: percentile(ttfts, 0.99), samples: ttfts.length },
    errorSamples: [...new Set(samples.flatMap((s) => s.errorSamples))]
  }
}

/**
 * Starts nats-server, an `iop node` serving `models` from the upstream over it and an `iop edge` on the bus
 * with no models of its own; measures it against `inProcess` (an edge with the same models embedded), then
 * stops what it started.
 */
export const measureNats = async (options: {
  readonly upstreamPort: number
  readonly inProcess: { readonly port: number; readonly proc: Proc }
  readonly startEdge: (configFile: string) => Promise<{ readonly port: number; readonly proc: Proc }>
  readonly edgeMain: string
  readonly nodeFlags: ReadonlyArray<string>
  readonly tmp: string
  readonly tokens: number
  readonly log: (text: string) => void
  readonly rounds: number
  /** Multiplies every run's and warm-up's duration (BENCH_QUICK shortens them). */
  readonly durationScale: number
}): Promise<NatsFigures> => {
  const ms = (x: number) => Math.round(x * options.durationScale)
  const started = performance.now()
  const nats = await startNatsServer()
  const bus = { nats: { servers: [`nats://127.0.0.1:${nats.port}`] }, nodeTimeoutMs: 3_000 }
  const models = ["bench", "paced"]
  const nodeFile = join(options.tmp, "node.json")
  writeFileSync(
    nodeFile,
    JSON.stringify({
      node: { id: "bench-node", maxConcurrentRuns: 256 },
      bus,
      models: models.map((id) => ({
        id,
        provider: { type: "openai", baseUrl: `http://127.0.0.1:${options.upstreamPort}/v1`, model: id }
      })),
      runs: { idleTimeoutMs: 600_000 }
    })
  )
  const edgeFile = join(options.tmp, "edge-nats.json")
  writeFileSync(
    edgeFile,
    JSON.stringify({ server: { host: "127.0.0.1" }, bus, models: [], runs: { idleTimeoutMs: 600_000 } })
  )
  const procs: Array<Proc> = [nats.proc]
  try {
    const node = spawnNode(
      "node",
      options.edgeMain,
      ["node", "--config", nodeFile, "--log-level", "warn"],
      options.nodeFlags
    )
    procs.push(node)
    const edge = await options.startEdge(edgeFile)
    procs.push(edge.proc)
    await waitModels(edge.proc, node, edge.port, models)

    const targets: ReadonlyArray<PathTarget> = [
      { path: "in-process", port: options.inProcess.port, procs: [options.inProcess.proc], broker: undefined },
      { path: "nats", port: edge.port, procs: [edge.proc, node], broker: nats.proc }
    ]
    for (const target of targets) {
      options.log(`  warm-up ${target.path}`)
      await measure(target, SCENARIOS[1], ms(WARMUP_MS), options.tokens)
      await measure(target, SCENARIOS[3], ms(WARMUP_MS / 4), options.tokens)
    }
    const samples = new Map<string, Array<Sample>>()
    for (let round = 0; round < options.rounds; round++) {
      for (const scenario of SCENARIOS) {
        const order = round % 2 === 0 ? targets : [...targets].reverse()
        for (const target of order) {
          const sample = await measure(target, scenario, ms(scenario.durationMs), options.tokens)
          const key = `${scenario.mode}/${scenario.concurrency}/${target.path}`
          samples.set(key, [...(samples.get(key) ?? []), sample])
          options.log(
            `  round ${round + 1} ${scenario.mode} N=${scenario.concurrency} ${target.path}: ` +
              `${fixed(sample.tokens / (sample.elapsedMs / 1000), 0)} tok/s` +
              (sample.errors > 0 ? `, ${sample.errors} errors (${sample.errorSamples.join("; ")})` : "")
          )
        }
      }
    }
    const rows = SCENARIOS.flatMap((scenario) =>
      (["in-process", "nats"] as const).map((path) =>
        toRow(scenario, path, samples.get(`${scenario.mode}/${scenario.concurrency}/${path}`) ?? [])
      )
    )
    const comparisons = SCENARIOS.flatMap((scenario): Array<NatsComparison> => {
      const find = (path: NatsPath) =>
        rows.find((r) => r.mode === scenario.mode && r.concurrency === scenario.concurrency && r.path === path)
      const local = find("in-process")
      const remote = find("nats")
      if (local === undefined || remote === undefined) return []
      return [{
        mode: scenario.mode,
        concurrency: scenario.concurrency,
        throughputRatio: remote.tokensPerSec / local.tokensPerSec,
        addedTtftP50Ms: remote.ttftMs.p50 - local.ttftMs.p50,
        addedTtftP99Ms: remote.ttftMs.p99 - local.ttftMs.p99,
        cpuRatio: remote.cpuSecondsPer1kTokens / local.cpuSecondsPer1kTokens
      }]
    })
    return {
      settings: { rounds: options.rounds, scenarios: SCENARIOS },
      rows,
      comparisons,
      seconds: (performance.now() - started) / 1000
    }
  } finally {
    for (const proc of procs.reverse()) await stop(proc)
  }
}

// ---------------------------------------------------------------------------------------------- report

export const natsTable = (figures: NatsFigures): string =>
  table(
    [
      "mode",
      "N",
      "path",
      "tok/s",
      "NATS ÷ in-proc tok/s",
      "TTFT p50 ms",
      "TTFT p99 ms",
      "added p50 ms",
      "added p99 ms",
      "CPU ms/1k tok",
      "(edge / node)",
      "CPU ratio",
      "nats-server ms/1k",
      "errors"
    ],
    figures.rows.map((row) => {
      const c = figures.comparisons.find((x) => x.mode === row.mode && x.concurrency === row.concurrency)
      const nats = row.path === "nats" && c !== undefined
      return [
        row.mode,
        String(row.concurrency),
        row.path,
        fixed(row.tokensPerSec, 0),
        nats ? fixed(c.throughputRatio, 2) : "",
        `${fixed(row.ttftMs.p50, 2)}`,
        `${fixed(row.ttftMs.p99, 2)} (n=${row.ttftMs.samples})`,
        nats ? fixed(c.addedTtftP50Ms, 2) : "",
        nats ? fixed(c.addedTtftP99Ms, 2) : "",
        fixed(row.cpuSecondsPer1kTokens * 1000, 2),
        row.path === "nats"
          ? `${fixed(row.edgeCpuSecondsPer1kTokens * 1000, 2)} / ${fixed(row.nodeCpuSecondsPer1kTokens * 1000, 2)}`
          : "",
        nats ? fixed(c.cpuRatio, 2) : "",
        row.path === "nats" ? fixed(row.natsServerCpuSecondsPer1kTokens * 1000, 2) : "",
        String(row.errors)
      ]
    })
  )

/** The two NATS figures the issue asks for, as rows of the main report's summary. */
export const natsHeadline = (figures: NatsFigures) => {
  const at = (mode: Scenario["mode"], n: number) => figures.comparisons.find((c) => c.mode === mode && c.concurrency === n)
  return {
    /** NATS tok/s ÷ in-process tok/s, 16 burst streams. */
    burst16Ratio: at("burst", 16)?.throughputRatio ?? Number.NaN,
    /** TTFT over NATS − in-process, 16 paced streams. */
    paced16AddedTtftP50Ms: at("paced", 16)?.addedTtftP50Ms ?? Number.NaN,
    paced16AddedTtftP99Ms: at("paced", 16)?.addedTtftP99Ms ?? Number.NaN
  }
}
