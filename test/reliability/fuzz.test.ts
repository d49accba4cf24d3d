import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"
import { sleep } from "./harness/edge.js"
import { chatUrl, send } from "./harness/exchange.js"
import { fuzzEdgeConfig, GIANT_MAX_TEST, giantSchemaRequest, runFuzz } from "./harness/fuzz.js"

/**
 * Hostile request bodies (fast-check) against one running edge with echo
 * models (one plain, two strict so that tool-call validation runs): the edge
 * answers each with a well-formed 200/400/404 (or the contract's 502
 * tool_validation_error), a 400 for a JSON object names the field, and the
 * process stays up and idle. `npm test` sends 300, this file's soak tier
 * (IOP_SOAK=1, in `npm run soak`) 2,000, and bench/soak.ts 10,000.
 *
 * IOP_FUZZ_CASES (default 300; soak tier 2000), IOP_FUZZ_SEED (default
 * 424242): a failing case is reported with its case number and seed;
 * `generateCase(seed, n)` in harness/fuzz.ts rebuilds it.
 */

const SOAK = process.env["IOP_SOAK"] === "1"

const envInt = (name: string, fallback: number): number => {
  const value = Number(process.env[name])
  return Number.isInteger(value) && value > 0 ? value : fallback
}

const CASES = envInt("IOP_FUZZ_CASES", SOAK ? 2_000 : 300)
/** The soak tier's bound on how long a request waits while the edge compiles a giant schema (a budget: soak only). */
const PING_BUDGET_MS = 2_000
const SEED = envInt("IOP_FUZZ_SEED", 424_242)
const GIANT_PROPERTIES = 3_000

describe("fuzz: hostile request bodies", () => {
  let edge: EdgeProcess

  beforeAll(async () => {
    edge = await startEdge({ config: fuzzEdgeConfig() })
  })
  afterAll(async () => {
    await edge?.stop("SIGKILL")
  })

  it(`${CASES} generated bodies, 8 at a time: no 5xx but tool_validation_error, every 400 names its field, no crash`, async () => {
    const report = await runFuzz(edge, { cases: CASES, seed: SEED, concurrency: 8, giantMax: GIANT_MAX_TEST })
    const summary = JSON.stringify({ ...report, violations: undefined }, null, 1)
    console.log(`fuzz: ${report.cases} cases in ${report.ms} ms (p50 ${report.p50Ms} ms, p99 ${report.p99Ms} ms, max ${report.maxMs} ms)`)
    console.log(`fuzz statuses: ${JSON.stringify(report.statuses)}`)
    if (report.slowest.length > 0) console.log(`fuzz slowest:\n  ${report.slowest.join("\n  ")}`)
    expect(report.violations, `${report.violationCount} cases failed\n${summary}`).toEqual([])
    expect(edge.proc.exitCode).toBeNull()
  }, 240_000)

  it(`a valid call against a ${GIANT_PROPERTIES}-property tool schema (strict) is accepted, and the edge answers others meanwhile${SOAK ? ` within ${PING_BUDGET_MS} ms` : ""}`, async () => {
    let stop = false
    const latencies: Array<number> = []
    const failures: Array<string> = []
    const background = (async () => {
      for (let i = 0; i < 400 && !stop; i++) {
        const ex = await send(chatUrl(edge.baseURL), { model: "echo", messages: [{ role: "user", content: `ping ${i}` }] }, { timeoutMs: 30_000 })
        latencies.push(ex.ms)
        if (ex.status !== 200) failures.push(`ping ${i}: ${ex.status} ${ex.error ?? ex.body.slice(0, 200)}`)
        await sleep(50)
      }
    })()
    await sleep(200)
    const big = giantSchemaRequest(GIANT_PROPERTIES, false)
    big.messages[0]!.content += ` ` // a schema and text of its own (no compile cache hit from the fuzz)
    const ex = await send(chatUrl(edge.baseURL), big, { timeoutMs: 60_000 })
    stop = true
    await background
    const worst = Math.max(...latencies)
    console.log(`giant schema: ${ex.ms} ms, status ${ex.status}; concurrent pings: ${latencies.length}, slowest ${worst} ms`)
    expect(ex.status, ex.body.slice(0, 500)).toBe(200)
    const message = JSON.parse(ex.body).choices[0].message
    expect(message.tool_calls?.[0]?.function?.name).toBe("big")
    expect(failures).toEqual([])
    expect(latencies.length).toBeGreaterThan(0)
    if (SOAK) expect(worst).toBeLessThan(PING_BUDGET_MS)
  }, 120_000)
})
