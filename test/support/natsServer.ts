import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { track } from "./edgeProcess.js"

/** A real `nats-server` on a loopback port of its own choosing, for transport tests. */
export interface NatsServer {
  readonly port: number
  readonly url: string
  /** Kills the server (SIGKILL, like a crash) and waits until it is gone. */
  readonly crash: () => Promise<void>
  /** Starts it again on the same port; resolves once it is ready. */
  readonly revive: () => Promise<void>
  /** `crash`, `downMs` of downtime, `revive`. */
  readonly restart: (downMs?: number) => Promise<void>
  readonly stop: () => Promise<void>
}

const BIN = process.env["NATS_SERVER_BIN"] ?? "nats-server"

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

const LISTENING = /Listening for client connections on [^\s]*:(\d+)/
const READY = /Server is ready/

/** Spawns nats-server on `port` (-1: one it picks) and resolves with the port once it says it is ready. */
const launch = (port: number, extra: ReadonlyArray<string>): Promise<{ readonly proc: ChildProcess; readonly port: number }> =>
  new Promise((resolve, reject) => {
    let output = ""
    const proc = spawn(BIN, ["-a", "127.0.0.1", "-p", String(port), ...extra], { stdio: ["ignore", "pipe", "pipe"] })
    const tracked = track(proc, `nats-server -p ${port}`, () => output)
    const onData = (d: Buffer) => {
      output += d.toString()
      const listening = LISTENING.exec(output)
      if (READY.test(output) && listening?.[1] !== undefined) {
        tracked.ready()
        resolve({ proc, port: Number(listening[1]) })
      }
    }
    proc.stdout?.on("data", onData)
    proc.stderr?.on("data", onData)
    proc.once("exit", (code, signal) => reject(new Error(`nats-server exited (code ${code}, signal ${signal}) before it was ready: ${output}`)))
    proc.once("error", (e) => reject(new Error(`nats-server could not start (${BIN}): ${e.message}`)))
  })

const exited = (proc: ChildProcess): Promise<void> =>
  proc.exitCode !== null || proc.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => proc.once("exit", () => resolve()))

export interface NatsServerOptions {
  /** JetStream on (`-js`), its store in a temporary directory of its own (removed when it stops). */
  readonly jetstream?: boolean
}

export const startNatsServer = async (options: NatsServerOptions = {}): Promise<NatsServer> => {
  const storeDir = options.jetstream === true ? mkdtempSync(join(tmpdir(), "iop-nats-js-")) : undefined
  const extra = storeDir === undefined ? [] : ["-js", "-sd", storeDir]
  const first = await launch(-1, extra)
  let proc: ChildProcess | undefined = first.proc
  const port = first.port

  const crash = async () => {
    const p = proc
    proc = undefined
    if (p === undefined) return
    p.kill("SIGKILL")
    await exited(p)
  }
  const revive = async () => {
    if (proc === undefined) proc = (await launch(port, extra)).proc
  }

  return {
    port,
    url: `nats://127.0.0.1:${port}`,
    crash,
    revive,
    restart: async (downMs = 0) => {
      await crash()
      if (downMs > 0) await new Promise((resolve) => setTimeout(resolve, downMs))
      await revive()
    },
    stop: async () => {
      await crash()
      if (storeDir !== undefined) rmSync(storeDir, { recursive: true, force: true })
    }
  }
}
