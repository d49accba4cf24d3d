import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { get } from "./exchange.js"

/**
 * What the reliability harness needs of a running edge. Both
 * test/support/edgeProcess.ts's `startEdge` (in vitest) and `spawnEdge` below
 * (in the soak, outside vitest) give it.
 */
export interface EdgeLike {
  readonly url: string
  readonly baseURL: string
  readonly proc: ChildProcess
  readonly stop: (signal?: NodeJS.Signals) => Promise<number | null>
  readonly exited: Promise<number | null>
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** The built binary, located from the repository root (works from test/ and from the compiled soak). */
export const binPath = (root: string): string => join(root, "dist", "bin", "main.js")

/** The repository root: three levels up from test/reliability/harness, four from dist-bench/test/reliability/harness. */
export const repoRoot = (): string => {
  const here = fileURLToPath(new URL(".", import.meta.url))
  return here.includes("/dist-bench/") ? join(here, "..", "..", "..", "..") : join(here, "..", "..", "..")
}

const LISTENING = /"message":"Listening on (http:\/\/[^"]+)"/
const live = new Set<ChildProcess>()
const tempDirs = new Set<string>()

/** SIGKILLs every edge `spawnEdge` started that still runs; removes their config files. */
export const killSpawned = (): void => {
  for (const proc of live) if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL")
  live.clear()
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true })
  tempDirs.clear()
}

/**
 * Starts `node dist/bin/main.js edge --config FILE --port 0` outside vitest.
 * Only the Listening line and the last 16 KiB of output are kept (a soak
 * writes a lot of access-log lines).
 */
export const spawnEdge = async (config: object, options: { readonly timeoutMs?: number } = {}): Promise<EdgeLike> => {
  const dir = mkdtempSync(join(tmpdir(), "iop-soak-"))
  tempDirs.add(dir)
  const file = join(dir, "edge.json")
  writeFileSync(file, JSON.stringify(config))
  const env: NodeJS.ProcessEnv = { ...process.env }
  delete env["IOP_CONFIG"]
  const proc = spawn(process.execPath, [binPath(repoRoot()), "edge", "--config", file, "--port", "0"], {
    env,
    stdio: ["ignore", "pipe", "pipe"]
  })
  live.add(proc)
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)))
  void exited.then(() => live.delete(proc))
  let tail = ""
  let listening: string | undefined
  const keep = (text: string) => {
    if (listening === undefined) {
      const m = LISTENING.exec(tail + text)
      if (m?.[1] !== undefined) listening = m[1]
    }
    tail = (tail + text).slice(-16_384)
  }
  proc.stdout?.setEncoding("utf8")
  proc.stderr?.setEncoding("utf8")
  proc.stdout?.on("data", keep)
  proc.stderr?.on("data", keep)
  const deadline = Date.now() + (options.timeoutMs ?? 20_000)
  while (listening === undefined) {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`edge exited before listening:\n${tail}`)
    if (Date.now() > deadline) {
      proc.kill("SIGKILL")
      throw new Error(`edge did not listen within ${options.timeoutMs ?? 20_000} ms:\n${tail}`)
    }
    await sleep(25)
  }
  const url = listening
  return {
    url,
    baseURL: `${url}/v1`,
    proc,
    exited,
    stop: async (signal: NodeJS.Signals = "SIGTERM") => {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill(signal)
        const killer = setTimeout(() => proc.kill("SIGKILL"), 15_000)
        const code = await exited
        clearTimeout(killer)
        return code
      }
      return exited
    }
  }
}

// ---------------------------------------------------------------------------
// /metrics

export interface Gauges {
  readonly runs: number
  readonly streams: number
  /** The edge's largest event-loop delay since the last scrape (prom-client's monitor), s. */
  readonly loopLagMaxSeconds: number
}

const gauge = (text: string, name: string): number => {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text)
  return m?.[1] === undefined ? Number.NaN : Number(m[1])
}

export const readGauges = async (url: string): Promise<Gauges> => {
  const { body: text } = await get(`${url}/metrics`)
  return {
    runs: gauge(text, "iop_active_runs"),
    streams: gauge(text, "iop_active_streams"),
    loopLagMaxSeconds: gauge(text, "iop_nodejs_eventloop_lag_max_seconds")
  }
}

/** Polls /metrics until `iop_active_runs` and `iop_active_streams` are both 0 (at most `timeoutMs`); returns the last reading. */
export const waitIdle = async (url: string, timeoutMs = 5_000): Promise<Gauges & { readonly idle: boolean; readonly waitedMs: number }> => {
  const start = Date.now()
  for (;;) {
    const g = await readGauges(url).catch((): Gauges => ({ runs: Number.NaN, streams: Number.NaN, loopLagMaxSeconds: Number.NaN }))
    if (g.runs === 0 && g.streams === 0) return { ...g, idle: true, waitedMs: Date.now() - start }
    if (Date.now() - start > timeoutMs) return { ...g, idle: false, waitedMs: Date.now() - start }
    await sleep(50)
  }
}

/** "iop_active_runs N / iop_active_streams M" violations when the edge did not come back to idle. */
export const idleViolations = async (url: string, what: string, timeoutMs = 5_000): Promise<Array<string>> => {
  const g = await waitIdle(url, timeoutMs)
  return g.idle ? [] : [`${what}: after ${g.waitedMs} ms iop_active_runs=${g.runs} iop_active_streams=${g.streams} (expected 0 and 0)`]
}

// ---------------------------------------------------------------------------
// /proc readings of a process (Linux)

const CLOCK_TICKS = 100

/** Resident set size in MiB, or NaN when the process is gone. */
export const rssMiB = (pid: number): number => {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return m?.[1] === undefined ? Number.NaN : Number(m[1]) / 1024
  } catch {
    return Number.NaN
  }
}

/** User + system CPU seconds of the process so far, or NaN when it is gone. */
export const cpuSeconds = (pid: number): number => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    // fields[0] is field 3 (state); utime is field 14, stime field 15.
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  } catch {
    return Number.NaN
  }
}

export interface RssSampler {
  readonly samples: Array<{ readonly t: number; readonly rssMiB: number }>
  readonly stop: () => void
  readonly summary: () => { readonly startMiB: number; readonly peakMiB: number; readonly endMiB: number; readonly samples: number }
}

/** Samples the RSS of `pid` every `everyMs` until stopped. */
export const sampleRss = (pid: number, everyMs = 1_000): RssSampler => {
  const samples: Array<{ t: number; rssMiB: number }> = []
  const start = Date.now()
  const take = () => {
    const r = rssMiB(pid)
    if (!Number.isNaN(r)) samples.push({ t: Date.now() - start, rssMiB: r })
  }
  take()
  const timer = setInterval(take, everyMs)
  return {
    samples,
    stop: () => {
      take()
      clearInterval(timer)
    },
    summary: () => ({
      startMiB: samples[0]?.rssMiB ?? Number.NaN,
      peakMiB: samples.reduce((m, s) => Math.max(m, s.rssMiB), 0),
      endMiB: samples[samples.length - 1]?.rssMiB ?? Number.NaN,
      samples: samples.length
    })
  }
}
