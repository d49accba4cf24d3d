import { type ChildProcess, spawn } from "node:child_process"
import { connect as tcpConnect, createServer } from "node:net"

/** A real `nats-server` on a free loopback port, for transport tests. */
export interface NatsServer {
  readonly port: number
  readonly url: string
  /** Kills the server (SIGKILL, like a crash), waits `downMs`, and starts it again on the same port. */
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

const accepts = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = tcpConnect({ host: "127.0.0.1", port })
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
  })

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const waitUntilAccepting = async (port: number, proc: ChildProcess, output: () => string): Promise<void> => {
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`nats-server exited (${proc.exitCode}): ${output()}`)
    if (await accepts(port)) return
    await sleep(25)
  }
  throw new Error(`nats-server did not accept connections on ${port}: ${output()}`)
}

const exited = (proc: ChildProcess): Promise<void> =>
  proc.exitCode !== null || proc.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => proc.once("exit", () => resolve()))

export const startNatsServer = async (): Promise<NatsServer> => {
  const port = await freePort()
  let proc: ChildProcess | undefined
  let output = ""

  const launch = async () => {
    output = ""
    const p = spawn(BIN, ["-a", "127.0.0.1", "-p", String(port)], { stdio: ["ignore", "pipe", "pipe"] })
    p.stdout?.on("data", (d: Buffer) => (output += d.toString()))
    p.stderr?.on("data", (d: Buffer) => (output += d.toString()))
    proc = p
    await waitUntilAccepting(port, p, () => output)
  }

  const kill = async () => {
    const p = proc
    proc = undefined
    if (p === undefined) return
    p.kill("SIGKILL")
    await exited(p)
  }

  await launch()
  return {
    port,
    url: `nats://127.0.0.1:${port}`,
    restart: async (downMs = 0) => {
      await kill()
      if (downMs > 0) await sleep(downMs)
      await launch()
    },
    stop: kill
  }
}
