/**
 * `node dist-bench/bench/perRequest.js [ROUNDS] [MS]`: the edge's fixed per-request CPU, quickly, for one change at
 * a time — CPU ms per non-stream request (16 clients, 256 tokens from a JSON upstream), per streamed request
 * (burst, 16 clients) and per 1k tokens of 16 paced streams (5 ms a token: a read and a write per token), each
 * round in turn, from /proc. `PROFILE=1` CPU-profiles the edge and prints where its time goes. Ranges over rounds:
 * the machine is shared.
 */
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { completionText } from "./fakeText.js"
import { requestBody, runLoad } from "./load.js"
import { cpuSeconds, freePort, killAll, listeningPort, spawnNode, stop, waitHealthy } from "./procs.js"
import { formatSummary, summarise } from "./profile.js"

const TOKENS = 256
const rounds = Number(process.argv[2] ?? "3")
const runMs = Number(process.argv[3] ?? "2000")
const here = dirname(fileURLToPath(import.meta.url))
const profile = process.env["PROFILE"] === "1"
/** `ONLY=nonstream`, `ONLY=stream` or `ONLY=paced`: one kind of request (a profile of that kind alone). */
const only = process.env["ONLY"]

const main = async () => {
  const tmp = mkdtempSync(join(os.tmpdir(), "per-request-"))
  const upstream = spawnNode("upstream", resolve(here, "upstream.js"), [String(TOKENS), "5"])
  const upstreamPort = await listeningPort(upstream)
  const config = join(tmp, "edge.json")
  writeFileSync(config, JSON.stringify({
    server: { host: "127.0.0.1" },
    runs: { idleTimeoutMs: 600_000 },
    models: ["bench", "paced"].map((id) => ({
      id,
      provider: { type: "openai", baseUrl: `http://127.0.0.1:${upstreamPort}/v1`, model: id }
    }))
  }))
  const port = await freePort()
  const flags = profile ? ["--cpu-prof", "--cpu-prof-dir", tmp] : []
  const edge = spawnNode(
    "edge",
    resolve(here, "../src/bin/main.js"),
    ["edge", "--config", config, "--port", String(port), "--log-level", "warn"],
    flags
  )
  await waitHealthy(edge, port)
  type Kind = "nonstream" | "stream" | "paced"
  /** CPU ms per request (per 1k tokens for `paced`). */
  const once = async (kind: Kind, ms: number) => {
    if (only !== undefined && only !== kind) return Number.NaN
    const stream = kind !== "nonstream"
    const cpu0 = cpuSeconds(edge.pid)
    const result = await runLoad({
      port,
      body: requestBody(kind === "paced" ? "paced" : "bench", stream),
      concurrency: 16,
      durationMs: ms,
      expectTokens: TOKENS,
      ...(stream ? {} : { expectContent: completionText(TOKENS) })
    })
    if (result.errors > 0) throw new Error(`errors: ${result.errorSamples.join("; ")}`)
    const cpuMs = (cpuSeconds(edge.pid) - cpu0) * 1000
    return kind === "paced" ? (cpuMs / result.tokens) * 1000 : cpuMs / result.ok
  }
  // Warm-up: the JIT's first seconds would be billed to the first round.
  for (let i = 0; i < 2; i++) {
    await once("nonstream", 1500)
    await once("stream", 1500)
    await once("paced", 1500)
  }
  const nonStream: Array<number> = []
  const streamed: Array<number> = []
  const paced: Array<number> = []
  for (let i = 0; i < rounds; i++) {
    nonStream.push(await once("nonstream", runMs))
    streamed.push(await once("stream", runMs))
    paced.push(await once("paced", runMs))
  }
  const show = (xs: ReadonlyArray<number>) =>
    `${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)} (${xs.map((x) => x.toFixed(3)).join(" ")})`
  process.stdout.write(
    `CPU ms per non-stream request: ${show(nonStream)}\nCPU ms per streamed request:   ${show(streamed)}\n` +
      `CPU ms per 1k paced tokens:    ${show(paced)}\n`
  )
  await stop(edge)
  await stop(upstream)
  if (profile) {
    const file = readdirSync(tmp).find((f) => f.endsWith(".cpuprofile"))
    if (file !== undefined) process.stdout.write(`${formatSummary(summarise(join(tmp, file), 40))}\n`)
  }
}

main().then(
  () => killAll(),
  async (error: unknown) => {
    process.stderr.write(`failed: ${error instanceof Error ? error.message : String(error)}\n`)
    await killAll()
    process.exitCode = 1
  }
)
