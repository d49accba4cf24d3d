/**
 * `npm run bench:heap`: what one idle stream holds in the edge's heap. Starts
 * the built edge (dist/bin/main.js; the script builds it) on the fake
 * upstream's `stall` model, warms it, then takes V8 heap snapshots (through the
 * preloaded bench/childAgent.ts: `v8.writeHeapSnapshot`, which collects garbage
 * first) with 0 idle streams, with HEAP_STREAMS (default 200) idle streams
 * open, and again once they have all hung up. Prints, per idle stream: Effect
 * fibers (objects whose constructor is `FiberRuntime`), channel executors
 * (`ChannelExecutor`), closures, objects and bytes (the growth of the heap's
 * summed self sizes: what the open streams keep alive), then the constructors
 * that grew most, and what was left after the hang-up. Snapshots are deleted
 * unless HEAP_KEEP=1 (then their paths are printed). Exits 1 when it could not
 * measure.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { diff, type DiffRow, tally, total } from "./heapDiff.js"
import { openIdleStreams, requestBody, runLoad } from "./load.js"
import { ask, freePort, killAll, listeningPort, type Proc, sleep, spawnNode, stop, waitHealthy } from "./procs.js"
import { fixed, table } from "./table.js"

const envInt = (name: string, fallback: number): number => {
  const value = Number(process.env[name])
  return Number.isInteger(value) && value > 0 ? value : fallback
}

const STREAMS = envInt("HEAP_STREAMS", 200)
const KEEP = process.env["HEAP_KEEP"] === "1"
const TOKENS = 256
const here = dirname(fileURLToPath(import.meta.url))
const root = resolve(here, "../..")
const edgeMain = join(root, "dist", "bin", "main.js")
const agentFlags = ["--expose-gc", "--import", pathToFileURL(resolve(here, "childAgent.js")).href]

const log = (text: string) => process.stdout.write(`${text}\n`)

const openStalls = async (upstream: Proc): Promise<number> => (await ask<{ openStalls: number }>(upstream, "stats")).openStalls

/** Waits (up to `ms`) until the upstream has no `stall` request open; returns how many still are. */
const settleUpstream = async (upstream: Proc, ms: number): Promise<number> => {
  const deadline = performance.now() + ms
  let open = await openStalls(upstream)
  while (open > 0 && performance.now() < deadline) {
    await sleep(100)
    open = await openStalls(upstream)
  }
  return open
}

const FIBER = "object: FiberRuntime"
const EXECUTOR = "object: ChannelExecutor"
const isClosure = (key: string) => key.startsWith("closure: ")

const count = (rows: ReadonlyArray<DiffRow>, key: string) => rows.find((r) => r.key === key)?.count ?? 0

const main = async (): Promise<number> => {
  const tmp = mkdtempSync(join(os.tmpdir(), "iop-heap-"))
  process.env["BENCH_HEAP_DIR"] = tmp
  try {
    const upstream = spawnNode("upstream", resolve(here, "upstream.js"), [String(TOKENS), "5"])
    const upstreamPort = await listeningPort(upstream)
    const configFile = join(tmp, "edge.json")
    writeFileSync(
      configFile,
      JSON.stringify({
        server: { host: "127.0.0.1" },
        runs: { idleTimeoutMs: 600_000 },
        models: ["bench", "stall"].map((id) => ({
          id,
          provider: { type: "openai", baseUrl: `http://127.0.0.1:${upstreamPort}/v1`, model: id }
        }))
      })
    )
    const port = await freePort()
    const edge = spawnNode(
      "edge",
      edgeMain,
      ["edge", "--config", configFile, "--port", String(port), "--log-level", "warn"],
      agentFlags
    )
    await waitHealthy(edge, port)
    log(`edge ${edgeMain} (pid ${edge.pid}), ${STREAMS} idle streams on a stalled upstream`)

    // Warm the code paths (JIT, pools, first-use caches) so that the difference is the streams.
    await runLoad({ port, body: requestBody("bench"), concurrency: 8, durationMs: 1_000, expectTokens: TOKENS })
    const warm = await openIdleStreams({ port, body: requestBody("stall"), count: 20, batch: 20, timeoutMs: 10_000 })
    warm.close()
    const leftFromWarmUp = await settleUpstream(upstream, 10_000)
    await sleep(500)

    const snapshot = async (label: string) => {
      const started = performance.now()
      const file = await ask<string>(edge, "heapSnapshot", 180_000)
      log(`  snapshot ${label}: ${fixed((performance.now() - started) / 1000, 1)} s`)
      return file
    }
    const files: Array<string> = []
    files.push(await snapshot("with 0 idle streams"))

    const streams = await openIdleStreams({ port, body: requestBody("stall"), count: STREAMS, batch: 50, timeoutMs: 20_000 })
    const heldUpstream = await openStalls(upstream)
    await sleep(1_000)
    files.push(await snapshot(`with ${streams.opened} idle streams`))

    streams.close()
    const leftOpen = await settleUpstream(upstream, 10_000)
    await sleep(1_000)
    files.push(await snapshot("after they all hung up"))
    await stop(edge, 10_000)
    await stop(upstream)

    const [empty, held, after] = files.map((file) => tally(file))
    if (empty === undefined || held === undefined || after === undefined) throw new Error("missing snapshot")
    const n = Math.max(1, streams.opened)
    const perStream = diff(empty, held, n)
    const left = diff(empty, after)
    const grew = total(perStream)
    const closures = total(perStream, isClosure)
    const leftClosures = total(left, isClosure)

    log(`\n== edge heap per idle stream (${streams.opened} streams open, ${streams.failed} failed; upstream held ${heldUpstream}) ==`)
    log("(snapshot with the streams − snapshot with none, ÷ streams; bytes = summed self sizes, i.e. what the streams keep alive;")
    log(" STYLE §6 = the figures measured for the edge as it was in 2026-12)")
    log(table(["figure", "per idle stream", "left after hang-up (total)", "STYLE §6"], [
      ["Effect fibers (FiberRuntime)", fixed(count(perStream, FIBER), 1), fixed(count(left, FIBER), 0), "12"],
      ["channel executors (ChannelExecutor)", fixed(count(perStream, EXECUTOR), 1), fixed(count(left, EXECUTOR), 0), "52"],
      ["closures", fixed(closures.count, 0), fixed(leftClosures.count, 0), "~900"],
      ["objects (all heap nodes)", fixed(grew.count, 0), fixed(total(left).count, 0), ""],
      ["retained KiB (heap self sizes)", fixed(grew.size / 1024, 1), fixed(total(left).size / 1024, 1), ""]
    ]))
    log("\n== what grew most, per idle stream ==")
    log(table(
      ["kind: constructor / function", "KiB", "count"],
      perStream.slice(0, 25).map((r) => [r.key.endsWith(": ") ? `${r.key}(no name)` : r.key, fixed(r.size / 1024, 2), fixed(r.count, 1)])
    ))
    const problems = [
      ...(streams.opened < STREAMS ? [`only ${streams.opened} of ${STREAMS} idle streams opened`] : []),
      ...(leftFromWarmUp > 0 ? [`${leftFromWarmUp} warm-up streams still open upstream before the first snapshot`] : []),
      ...(leftOpen > 0 ? [`${leftOpen} upstream requests still open 10 s after the hang-up (the last snapshot holds them)`] : [])
    ]
    for (const p of problems) log(`WARNING: ${p}`)
    if (KEEP) log(`\nsnapshots kept: ${files.join(" ")}`)
    return streams.opened === 0 ? 1 : 0
  } finally {
    await killAll()
    if (!KEEP) rmSync(tmp, { recursive: true, force: true })
  }
}

main().then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    process.stderr.write(`bench:heap failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
    process.exitCode = 1
  }
)
