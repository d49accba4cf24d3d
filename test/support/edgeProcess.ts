import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { availableParallelism, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll } from "vitest"

/**
 * The edge under test, two ways:
 *
 * - `startEdge` / `runIop` run the built `iop` binary (dist/bin/main.js) as a
 *   child process, for what only the binary shows: flags, exit codes, config
 *   file errors, signals. Build it first: `npx tsc -p tsconfig.build.json`
 *   (`npm test` does).
 * - `startInProcessEdge` serves the same layers (`Edge.layerServer`) inside
 *   the test process, for HTTP behaviour (no second of module loading).
 *
 * Nothing here waits against the clock: a start resolves on the Listening
 * line (or fails when the process exits first), a stop on the exit. The hang
 * guard is vitest's hook/test timeout, after which this file's `afterAll`
 * kills what is left.
 *
 * This module is also a vitest setup file (vitest.config.ts): it runs again
 * before every test file, so that its `afterAll` cleans up after each file
 * even though the module graph is shared between files (`isolate: false`).
 * Its state lives on `globalThis` so that every evaluation shares it.
 */

export const BIN = fileURLToPath(new URL("../../dist/bin/main.js", import.meta.url))

const LISTENING = /"message":"Listening on (http:\/\/[^"]+)"/

interface Registry {
  /** Child processes started by the test support modules that may still run. */
  readonly procs: Map<ChildProcess, { readonly what: string; readonly output: () => string; ready: boolean }>
  /** In-process edges still serving: each entry stops one. */
  readonly inProcess: Set<() => Promise<void>>
  readonly tempDirs: Set<string>
  exitHook: boolean
}

const registry: Registry = ((globalThis as Record<symbol, unknown>)[Symbol.for("iop.test.processes")] ??= {
  procs: new Map(),
  inProcess: new Set(),
  tempDirs: new Set(),
  exitHook: false
}) as Registry

/**
 * Registers a child process for the end-of-file cleanup (SIGKILL if it still
 * runs). `output` is printed when it never got `ready` (it hung starting).
 */
export const track = (proc: ChildProcess, what: string, output: () => string): { readonly ready: () => void } => {
  const entry = { what, output, ready: false }
  registry.procs.set(proc, entry)
  proc.once("exit", () => registry.procs.delete(proc))
  return { ready: () => void (entry.ready = true) }
}

/** SIGKILLs every child process still running, stops in-process edges, removes temp files. */
export const killLeftovers = async (): Promise<void> => {
  for (const [proc, entry] of registry.procs) {
    if (proc.exitCode === null && proc.signalCode === null) {
      if (!entry.ready) console.error(`${entry.what} never got ready; its output:\n${entry.output().slice(-8_000)}`)
      proc.kill("SIGKILL")
    }
  }
  registry.procs.clear()
  const stops = [...registry.inProcess]
  registry.inProcess.clear()
  await Promise.all(stops.map((stop) => stop().catch(() => undefined)))
  for (const dir of registry.tempDirs) rmSync(dir, { recursive: true, force: true })
  registry.tempDirs.clear()
}

afterAll(() => killLeftovers())
if (!registry.exitHook) {
  registry.exitHook = true
  process.once("exit", () => {
    for (const proc of registry.procs.keys()) if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL")
    for (const dir of registry.tempDirs) rmSync(dir, { recursive: true, force: true })
  })
}

/** Writes `content` (an object is JSON-encoded, a string written as it is) to a fresh temp file. */
export const writeTempFile = (content: string | object, name = "config.json"): string => {
  const dir = mkdtempSync(join(tmpdir(), "iop-e2e-"))
  registry.tempDirs.add(dir)
  const file = join(dir, name)
  writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content, null, 2))
  return file
}

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

/**
 * Starting the binary costs about a second of CPU (module loading). Starts
 * take turns, at most one per core, so that the first of several started at
 * once serves as soon as it can instead of all of them late.
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

/** Sends `signal` unless the process already ended; resolves with the exit code. */
const stopper = (proc: ChildProcess, exited: Promise<number | null>) => (signal: NodeJS.Signals = "SIGTERM") => {
  if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal)
  return exited
}

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
  return spawnServing(process.execPath, [BIN, ...args], childEnv(env), `iop ${args.join(" ")}`, configFile)
}

/**
 * Spawns `command args` (an `iop edge`, however it is launched) and resolves
 * once it logged its Listening line; rejects, with its output, when it exits
 * before.
 */
export const spawnServing = async (
  command: string,
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  what: string,
  configFile?: string,
  cwd?: string
): Promise<EdgeProcess> => {
  const release = await acquireStart()
  const proc = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"], ...(cwd !== undefined ? { cwd } : {}) })
  let out = ""
  let err = ""
  const tracked = track(proc, what, () => `--- stderr ---\n${err}\n--- stdout ---\n${out}`)
  proc.stdout?.setEncoding("utf8")
  proc.stderr?.setEncoding("utf8")
  proc.stderr?.on("data", (text: string) => (err += text))
  const exited = exitPromise(proc)

  const url = await new Promise<string>((resolve, reject) => {
    const fail = (why: string) => reject(new Error(`${what}: ${why}\n--- stderr ---\n${err}\n--- stdout ---\n${out}`))
    proc.stdout?.on("data", (text: string) => {
      out += text
      const match = LISTENING.exec(out)
      if (match?.[1] !== undefined) resolve(match[1])
    })
    proc.once("exit", (code, signal) => fail(`exited (code ${code}, signal ${signal}) before listening`))
    proc.once("error", (e) => fail(`could not start: ${e.message}`))
  }).finally(release)
  tracked.ready()

  return {
    url,
    baseURL: `${url}/v1`,
    port: Number(new URL(url).port),
    configFile,
    stdout: () => out,
    stderr: () => err,
    stop: stopper(proc, exited),
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

/** Runs `iop ARGS` to completion. */
export const runIop = async (
  args: ReadonlyArray<string>,
  options: { readonly env?: Record<string, string> } = {}
): Promise<RunResult> => {
  assertBuilt()
  const release = await acquireStart()
  const proc = spawn(process.execPath, [BIN, ...args], { env: childEnv(options.env), stdio: ["ignore", "pipe", "pipe"] })
  let out = ""
  let err = ""
  track(proc, `iop ${args.join(" ")}`, () => `--- stderr ---\n${err}\n--- stdout ---\n${out}`)
  proc.stdout?.setEncoding("utf8")
  proc.stderr?.setEncoding("utf8")
  proc.stdout?.on("data", (text: string) => (out += text))
  proc.stderr?.on("data", (text: string) => (err += text))
  // Wait for "close" (not "exit"): the pipes are drained by then.
  const code = await new Promise<number | null>((resolve) => {
    proc.once("close", (c) => resolve(c))
    proc.once("error", () => resolve(null))
  }).finally(release)
  return { code, stdout: out, stderr: err, listened: LISTENING.test(out) }
}

// ---------------------------------------------------------------------------
// In-process

export interface InProcessEdgeOptions {
  /** The config, as a config file would hold it (default: the embedded default, as with no file). */
  readonly config?: object
  /** Environment variables the edge's layers read (e.g. `server.apiKeysEnv`), over the real environment. */
  readonly env?: Record<string, string>
}

export interface InProcessEdge {
  /** `http://127.0.0.1:PORT` as logged by the edge. */
  readonly url: string
  readonly baseURL: string
  readonly port: number
  /** The JSON log lines so far, as the binary would write them on stdout. */
  readonly stdout: () => string
  /** Shuts the edge down (the graceful shutdown of the layers runs). */
  readonly stop: () => Promise<void>
}

/**
 * Serves `Edge.layerServer` on an ephemeral port of 127.0.0.1 inside the
 * test process: the config decoded as `iop edge --config FILE --port 0`
 * would, logs captured instead of written. Resolves on the Listening line.
 */
export const startInProcessEdge = async (options: InProcessEdgeOptions = {}): Promise<InProcessEdge> => {
  // Loaded on first use: this module is a setup file of every test file.
  const [Edge, EdgeConfig, LoadConfig, Effect, Either, Fiber, Layer, Logger, LogLevel, ConfigProvider] = await Promise.all([
    import("../../src/Edge.js"),
    import("../../src/config/EdgeConfig.js"),
    import("../../src/config/loadConfig.js"),
    import("effect/Effect"),
    import("effect/Either"),
    import("effect/Fiber"),
    import("effect/Layer"),
    import("effect/Logger"),
    import("effect/LogLevel"),
    import("effect/ConfigProvider")
  ])
  const decoded =
    options.config === undefined
      ? Either.right(EdgeConfig.defaultConfig())
      : LoadConfig.decodeConfigJson("in-process config", options.config)
  if (Either.isLeft(decoded)) throw new Error(decoded.left.message)
  const config = LoadConfig.applyOverrides(decoded.right, { port: 0 })

  let out = ""
  let listening: (url: string) => void = () => undefined
  const url = new Promise<string>((resolve) => (listening = resolve))
  const capture = Logger.map(Logger.jsonLogger, (line) => {
    out += `${line}\n`
    const match = LISTENING.exec(line)
    if (match?.[1] !== undefined) listening(match[1])
  })
  const level = { debug: LogLevel.Debug, info: LogLevel.Info, warn: LogLevel.Warning, error: LogLevel.Error, none: LogLevel.None }
  const env = ConfigProvider.fromMap(new Map(Object.entries(options.env ?? {}))).pipe(
    ConfigProvider.orElse(() => ConfigProvider.fromEnv())
  )
  const fiber = Effect.runFork(
    Layer.launch(Edge.layerServer(config)).pipe(
      Effect.provide(Layer.mergeAll(Logger.replace(Logger.defaultLogger, capture), Logger.minimumLogLevel(level[config.log.level]))),
      Effect.withConfigProvider(env)
    )
  )
  const stop = async () => {
    registry.inProcess.delete(stop)
    await Effect.runPromise(Fiber.interrupt(fiber))
  }
  registry.inProcess.add(stop)
  const served = await new Promise<string>((resolve, reject) => {
    void url.then(resolve)
    fiber.addObserver((exit) => reject(new Error(`the in-process edge stopped before listening: ${String(exit)}\n${out}`)))
  })
  return { url: served, baseURL: `${served}/v1`, port: Number(new URL(served).port), stdout: () => out, stop }
}
