import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { availableParallelism, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll } from "vitest"

/**
 * Runs the built `iop` binary (dist/bin/main.js) as a child process for
 * end-to-end tests. Build it first: `npx tsc -p tsconfig.build.json`
 * (`npm test` does).
 */

export const BIN = fileURLToPath(new URL("../../dist/bin/main.js", import.meta.url))

const DEFAULT_START_TIMEOUT_MS = Number(process.env["IOP_E2E_START_TIMEOUT_MS"] ?? "") || 10_000

const LISTENING = /"message":"Listening on (http:\/\/[^"]+)"/

export interface StartEdgeOptions {
  /** Written to a temp file and passed with `--config` (or `IOP_CONFIG`, see `configVia`). */
  readonly config?: object
  /** Extra command-line arguments after `edge`. */
  readonly args?: ReadonlyArray<string>
  /** Extra environment. `IOP_CONFIG` is removed from the inherited environment unless given here. */
  readonly env?: Record<string, string>
  /** How the config file reaches the process (default `flag`). */
  readonly configVia?: "flag" | "env"
  /** `--port 0` is added unless this is false or `args` has its own `--port`. */
  readonly ephemeralPort?: boolean
  /** How long to wait for the Listening line (default 10 s, or `IOP_E2E_START_TIMEOUT_MS` for slow or busy machines). */
  readonly startTimeoutMs?: number
}

export interface EdgeProcess {
  /** `http://127.0.0.1:PORT` as logged by the edge. */
  readonly url: string
  /** `url + "/v1"`, for the OpenAI SDK. */
  readonly baseURL: string
  readonly port: number
  /** The temp config file, when a config was given. */
  readonly configFile: string | undefined
  readonly stdout: () => string
  readonly stderr: () => string
  /** Sends `signal` (default SIGTERM) and resolves with the exit code (null when killed by a signal). */
  readonly stop: (signal?: NodeJS.Signals) => Promise<number | null>
  /** Resolves with the exit code when the process ends. */
  readonly exited: Promise<number | null>
  readonly proc: ChildProcess
}

const live = new Set<ChildProcess>()
const tempDirs = new Set<string>()

/**
 * Starting the binary costs about a second of CPU (module loading). Tests that
 * start several at once take turns, at most one per core, so that the start
 * timeout measures the edge and not the queue.
 */
const startSlots = Math.max(1, availableParallelism())
let startsRunning = 0
const startQueue: Array<() => void> = []
const acquireStart = async (): Promise<() => void> => {
  // A released slot is handed straight to the next waiter.
  if (startsRunning < startSlots) startsRunning++
  else await new Promise<void>((resolve) => startQueue.push(resolve))
  let released = false
  return () => {
    if (released) return
    released = true
    const next = startQueue.shift()
    if (next !== undefined) next()
    else startsRunning--
  }
}

/** SIGKILLs every process this module started that is still running; removes temp files. */
export const killLeftovers = (): void => {
  for (const proc of live) {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL")
  }
  live.clear()
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true })
  tempDirs.clear()
}

afterAll(() => killLeftovers())
process.once("exit", () => killLeftovers())

/** Writes `content` (an object is JSON-encoded, a string written as it is) to a fresh temp file. */
export const writeTempFile = (content: string | object, name = "config.json"): string => {
  const dir = mkdtempSync(join(tmpdir(), "iop-e2e-"))
  tempDirs.add(dir)
  const file = join(dir, name)
  writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content, null, 2))
  return file
}

const childEnv = (extra: Record<string, string> | undefined): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env }
  delete env["IOP_CONFIG"]
  return { ...env, ...extra }
}

const assertBuilt = (): void => {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: run \`npx tsc -p tsconfig.build.json\` first`)
}

const exitPromise = (proc: ChildProcess): Promise<number | null> =>
  new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) resolve(proc.exitCode)
    else proc.once("exit", (code) => resolve(code))
  })

/** Starts `iop edge`, resolves once it logged its Listening line. */
export const startEdge = async (options: StartEdgeOptions = {}): Promise<EdgeProcess> => {
  assertBuilt()
  const configFile = options.config !== undefined ? writeTempFile(options.config) : undefined
  const args = ["edge", ...(options.args ?? [])]
  const env: Record<string, string> = { ...options.env }
  if (configFile !== undefined) {
    if (options.configVia === "env") env["IOP_CONFIG"] = configFile
    else args.push("--config", configFile)
  }
  if (options.ephemeralPort !== false && !args.includes("--port")) args.push("--port", "0")

  const release = await acquireStart()
  const proc = spawn(process.execPath, [BIN, ...args], { env: childEnv(env), stdio: ["ignore", "pipe", "pipe"] })
  live.add(proc)
  let out = ""
  let err = ""
  proc.stdout?.setEncoding("utf8")
  proc.stderr?.setEncoding("utf8")
  proc.stderr?.on("data", (text: string) => (err += text))
  const exited = exitPromise(proc)
  exited.then(() => live.delete(proc), () => undefined)

  const timeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL")
      fail(`no Listening line within ${timeoutMs} ms`)
    }, timeoutMs)
    const fail = (why: string) => {
      clearTimeout(timer)
      reject(new Error(`iop edge ${args.join(" ")}: ${why}\n--- stderr ---\n${err}\n--- stdout ---\n${out}`))
    }
    proc.stdout?.on("data", (text: string) => {
      out += text
      const match = LISTENING.exec(out)
      if (match?.[1] !== undefined) {
        clearTimeout(timer)
        resolve(match[1])
      }
    })
    proc.once("exit", (code, signal) => fail(`exited (code ${code}, signal ${signal}) before listening`))
    proc.once("error", (e) => fail(`could not start: ${e.message}`))
  }).finally(release)
  const port = Number(new URL(url).port)

  const stop = async (signal: NodeJS.Signals = "SIGTERM"): Promise<number | null> => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill(signal)
      const killer = setTimeout(() => proc.kill("SIGKILL"), 15_000)
      const code = await exited
      clearTimeout(killer)
      return code
    }
    return exited
  }

  return {
    url,
    baseURL: `${url}/v1`,
    port,
    configFile,
    stdout: () => out,
    stderr: () => err,
    stop,
    exited,
    proc
  }
}

export interface RunResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  /** True when the process logged a Listening line (it should not have, for a bad config). */
  readonly listened: boolean
}

/**
 * Runs `iop ARGS` to completion (a command that does not end within
 * `timeoutMs`, default 30 s, is killed and reported with code null).
 */
export const runIop = async (
  args: ReadonlyArray<string>,
  options: { readonly env?: Record<string, string>; readonly timeoutMs?: number } = {}
): Promise<RunResult> => {
  assertBuilt()
  const release = await acquireStart()
  const proc = spawn(process.execPath, [BIN, ...args], { env: childEnv(options.env), stdio: ["ignore", "pipe", "pipe"] })
  live.add(proc)
  let out = ""
  let err = ""
  proc.stdout?.setEncoding("utf8")
  proc.stderr?.setEncoding("utf8")
  proc.stdout?.on("data", (text: string) => (out += text))
  proc.stderr?.on("data", (text: string) => (err += text))
  const timer = setTimeout(() => proc.kill("SIGKILL"), options.timeoutMs ?? 3 * DEFAULT_START_TIMEOUT_MS)
  // Wait for "close" (not "exit"): the pipes are drained by then.
  const code = await new Promise<number | null>((resolve) => {
    proc.once("close", (c) => resolve(c))
    proc.once("error", () => resolve(null))
  })
  clearTimeout(timer)
  release()
  live.delete(proc)
  return { code, stdout: out, stderr: err, listened: LISTENING.test(out) }
}
