/** Child processes of the bench (spawn, IPC asks, /proc readings) and the guarantee that every one of them dies with it. */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { get } from "node:http"
import { createServer } from "node:net"
import { isListening, isReply } from "./ipc.js"

export interface Proc {
  readonly name: string
  readonly child: ChildProcess
  readonly pid: number
  /** Resolves when the process has exited. */
  readonly exited: Promise<void>
  /** The last few KiB of its stdout and stderr, for error messages. */
  readonly output: () => string
}

const live = new Set<ChildProcess>()

const killAllNow = (): void => {
  for (const child of live) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
}

process.on("exit", killAllNow)
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    killAllNow()
    process.exit(130)
  })
}

export const spawnNode = (
  name: string,
  script: string,
  args: ReadonlyArray<string>,
  nodeFlags: ReadonlyArray<string> = []
): Proc => spawnProc(name, process.execPath, [...nodeFlags, script, ...args], true)

/** Any executable as a bench child (killed with the bench); `ipc` only for node children. */
export const spawnProc = (name: string, command: string, args: ReadonlyArray<string>, ipc = false): Proc => {
  const child = spawn(command, args, { stdio: ipc ? ["ignore", "pipe", "pipe", "ipc"] : ["ignore", "pipe", "pipe"] })
  live.add(child)
  const exited = new Promise<void>((resolve) =>
    child.once("exit", () => {
      live.delete(child)
      resolve()
    })
  )
  let tail = ""
  for (const stream of [child.stdout, child.stderr]) {
    stream?.setEncoding("utf8")
    stream?.on("data", (text: string) => {
      tail = (tail + text).slice(-4096)
    })
  }
  // Without a listener, a failed spawn (ENOENT) is an uncaught 'error' that kills the bench, report and all.
  child.on("error", (error) => {
    tail = `${tail}\n${name}: ${error.message}`.slice(-4096)
    if (child.pid === undefined) live.delete(child)
  })
  if (child.pid === undefined) throw new Error(`${name}: could not spawn ${command}`)
  return { name, child, pid: child.pid, exited, output: () => tail }
}

/** SIGTERM, then SIGKILL if it is still there after `graceMs` (a CPU profile is only written on a clean exit). */
export const stop = async (proc: Proc, graceMs = 3_000): Promise<void> => {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return
  proc.child.kill("SIGTERM")
  const timer = setTimeout(() => proc.child.kill("SIGKILL"), graceMs)
  await proc.exited
  clearTimeout(timer)
}

export const killAll = async (): Promise<void> => {
  const waits = [...live].map((child) => new Promise<void>((resolve) => child.once("exit", () => resolve())))
  killAllNow()
  await Promise.race([Promise.all(waits), sleep(3_000)])
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

const died = (proc: Proc): Promise<never> =>
  proc.exited.then(() => {
    throw new Error(
      `${proc.name} exited (code ${proc.child.exitCode}, signal ${proc.child.signalCode}); its output ended with: ${proc.output()}`
    )
  })

const timeout = (ms: number, what: string): Promise<never> =>
  new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms).unref())

/** The port a bench child reports once it listens. */
export const listeningPort = (proc: Proc, ms = 10_000): Promise<number> =>
  Promise.race([
    new Promise<number>((resolve) => {
      const onMessage = (message: unknown) => {
        if (!isListening(message)) return
        proc.child.off("message", onMessage)
        resolve(message.port)
      }
      proc.child.on("message", onMessage)
    }),
    died(proc),
    timeout(ms, `${proc.name} listening`)
  ])

let nextAsk = 0

export const ask = <A>(proc: Proc, type: string, ms = 10_000): Promise<A> => {
  const id = ++nextAsk
  let onMessage: (message: unknown) => void = () => {}
  return Promise.race([
    new Promise<A>((resolve) => {
      onMessage = (message: unknown) => {
        if (isReply(message) && message.id === id) resolve(message.reply as A)
      }
      proc.child.on("message", onMessage)
      proc.child.send({ id, type })
    }),
    died(proc),
    timeout(ms, `${proc.name} answering ${type}`)
  ]).finally(() => proc.child.off("message", onMessage))
}

/** A port that was free a moment ago (the edge takes `--port`; loopback, so the race is theoretical). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = address !== null && typeof address === "object" ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const healthy = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const req = get({ host: "127.0.0.1", port, path: "/healthz", agent: false, timeout: 1_000 }, (res) => {
      res.resume()
      resolve(res.statusCode === 200)
    })
    req.on("timeout", () => req.destroy())
    req.on("error", () => resolve(false))
  })

export const waitHealthy = async (proc: Proc, port: number, ms = 20_000): Promise<void> => {
  const deadline = performance.now() + ms
  while (performance.now() < deadline) {
    if (proc.child.exitCode !== null) break
    if (await healthy(port)) return
    await sleep(100)
  }
  throw new Error(`${proc.name} not healthy on port ${port} within ${ms} ms: ${proc.output()}`)
}

const clockTicks = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100
  } catch {
    return 100
  }
})()

/** utime + stime of a process (all its threads: JS, GC, libuv pool), in seconds, from /proc/<pid>/stat. */
export const cpuSeconds = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) / clockTicks
}

export const rssKiB = (pid: number): number => {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return match === null ? Number.NaN : Number(match[1])
}

export const openFds = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length

/** The soft and hard `Max open files` of a process. */
export const fdLimits = (pid: number | "self"): { readonly soft: number; readonly hard: number } => {
  const match = /^Max open files\s+(\S+)\s+(\S+)/m.exec(readFileSync(`/proc/${pid}/limits`, "utf8"))
  const value = (s: string | undefined) => (s === undefined || s === "unlimited" ? Number.POSITIVE_INFINITY : Number(s))
  return { soft: value(match?.[1]), hard: value(match?.[2]) }
}
