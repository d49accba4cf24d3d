/**
 * `npm run test:realup`'s global setup: one llama-server (scripts/realup/start.sh, built by setup.sh) on a free
 * loopback port with the tiny random model and a few slots; stopped by its PID file in teardown (stop.sh).
 */
import { execFileSync } from "node:child_process"
import { createServer } from "node:net"
import type { TestProject } from "vitest/node"

declare module "vitest" {
  export interface ProvidedContext {
    /** The llama-server's OpenAI base URL: `http://127.0.0.1:PORT/v1`. */
    realupUpstream: string
  }
}

const SCRIPTS = new URL("../../scripts/realup/", import.meta.url).pathname

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

export default async function setup(project: TestProject): Promise<() => void> {
  const port = await freePort()
  const env = {
    ...process.env,
    // A few slots (the tests run that many requests at once), 8k tokens of context each.
    REALUP_SLOTS: process.env["REALUP_SLOTS"] ?? "4",
    REALUP_CTX: process.env["REALUP_CTX"] ?? "32768"
  }
  execFileSync(`${SCRIPTS}start.sh`, [String(port)], { env, stdio: "inherit" })
  project.provide("realupUpstream", `http://127.0.0.1:${port}/v1`)
  return () => {
    execFileSync(`${SCRIPTS}stop.sh`, [String(port)], { env, stdio: "inherit" })
  }
}
