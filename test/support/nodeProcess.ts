import { type ChildProcess, spawn } from "node:child_process"
import { afterAll } from "vitest"
import { BIN, writeTempFile } from "./edgeProcess.js"

/**
 * Runs `iop node --config FILE` (the built binary) as a child process. Resolves
 * once the node logged "node serving over NATS". Every node still running is
 * SIGKILLed after the test file.
 */

export interface NodeProcess {
  readonly configFile: string
  readonly stdout: () => string
  readonly stderr: () => string
  /** The JSON log lines written so far (lines that do not parse are skipped). */
  readonly logs: () => ReadonlyArray<any>
  /** Sends `signal` (default SIGTERM) and resolves with the exit code (null when killed by a signal). */
  readonly stop: (signal?: NodeJS.Signals) => Promise<number | null>
  readonly exited: Promise<number | null>
  readonly proc: ChildProcess
}

const live = new Set<ChildProcess>()

const killAll = () => {
  for (const proc of live) if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL")
  live.clear()
}
afterAll(() => killAll())
process.once("exit", () => killAll())

const READY = /"message":"node serving over NATS"/

export const startNode = async (
  config: object,
  options: { readonly startTimeoutMs?: number; readonly env?: Record<string, string> } = {}
): Promise<NodeProcess> => {
  const configFile = writeTempFile(config, "node.json")
  const env: NodeJS.ProcessEnv = { ...process.env }
  delete env["IOP_CONFIG"]
  const proc = spawn(process.execPath, [BIN, "node", "--config", configFile], {
    env: { ...env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  live.add(proc)
  let out = ""
  let err = ""
  proc.stdout?.setEncoding("utf8")
  proc.stderr?.setEncoding("utf8")
  proc.stdout?.on("data", (t: string) => (out += t))
  proc.stderr?.on("data", (t: string) => (err += t))
  const exited = new Promise<number | null>((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) resolve(proc.exitCode)
    else proc.once("exit", (code) => resolve(code))
  })
  exited.then(() => live.delete(proc), () => undefined)

  const timeoutMs = options.startTimeoutMs ?? 15_000
  await new Promise<void>((resolve, reject) => {
    const started = Date.now()
    const timer = setInterval(() => {
      if (READY.test(out)) {
        clearInterval(timer)
        resolve()
      } else if (proc.exitCode !== null || proc.signalCode !== null || Date.now() - started > timeoutMs) {
        clearInterval(timer)
        proc.kill("SIGKILL")
        reject(new Error(`iop node did not start (exit ${proc.exitCode}):\n--- stderr ---\n${err}\n--- stdout ---\n${out}`))
      }
    }, 20)
  })

  const stop = async (signal: NodeJS.Signals = "SIGTERM"): Promise<number | null> => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill(signal)
      const killer = setTimeout(() => proc.kill("SIGKILL"), 20_000)
      const code = await exited
      clearTimeout(killer)
      return code
    }
    return exited
  }

  return {
    configFile,
    stdout: () => out,
    stderr: () => err,
    logs: () =>
      out.split("\n").flatMap((line) => {
        try {
          return line.trim() === "" ? [] : [JSON.parse(line)]
        } catch {
          return []
        }
      }),
    stop,
    exited,
    proc
  }
}
