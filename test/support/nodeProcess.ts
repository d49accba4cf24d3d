import { type ChildProcess, spawn } from "node:child_process"
import { BIN, track, writeTempFile } from "./edgeProcess.js"

/**
 * Runs `iop node --config FILE` (the built binary) as a child process. Resolves
 * once the node logged "node serving over NATS" (rejects when it exits
 * first). Every node still running is SIGKILLed after the test file
 * (edgeProcess.ts's cleanup).
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

const READY = /"message":"node serving over NATS"/

export const startNode = async (
  config: object,
  options: { readonly env?: Record<string, string> } = {}
): Promise<NodeProcess> => {
  const configFile = writeTempFile(config, "node.json")
  const env: NodeJS.ProcessEnv = { ...process.env }
  delete env["IOP_CONFIG"]
  const proc = spawn(process.execPath, [BIN, "node", "--config", configFile], {
    env: { ...env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  let err = ""
  const output = () => `--- stderr ---\n${err}\n--- stdout ---\n${out}`
  const tracked = track(proc, `iop node --config ${configFile}`, output)
  proc.stdout?.setEncoding("utf8")
  proc.stderr?.setEncoding("utf8")
  proc.stderr?.on("data", (t: string) => (err += t))
  const exited = new Promise<number | null>((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) resolve(proc.exitCode)
    else proc.once("exit", (code) => resolve(code))
  })

  await new Promise<void>((resolve, reject) => {
    proc.stdout?.on("data", (t: string) => {
      out += t
      if (READY.test(out)) resolve()
    })
    proc.once("exit", (code, signal) => reject(new Error(`iop node exited (code ${code}, signal ${signal}) before serving:\n${output()}`)))
    proc.once("error", (e) => reject(new Error(`iop node could not start: ${e.message}`)))
  })
  tracked.ready()

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
    stop: (signal: NodeJS.Signals = "SIGTERM") => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal)
      return exited
    },
    exited,
    proc
  }
}
