/**
 * `npm run bench:routing`: the edge's routing policies over real llama.cpp replicas, with an agent-shaped trace.
 *
 * Replicas: `REPLICAS` llama-servers (scripts/realup/start.sh, built by setup.sh), the Qwen-vocabulary tiny model
 * (`tiny-qwen.gguf`: real token counts), `SLOTS` slots each with enough context per slot for a whole session,
 * `--cache-ram 0` (only the slots cache prompts: no host-memory prompt cache to hide a miss).
 * Trace: as many sessions side by side as the replicas have slots; one shared system prompt and tool list
 * (~`SHARED` tokens), a short task per session, then `TURNS` turns each, every turn adding the model's answer and a
 * tool result of ~`RESULT` tokens (a file read), so each session's own history soon outweighs the shared part.
 * The same trace (fresh text per policy, so that no policy finds another's prefixes cached) is run through one
 * in-process edge whose three models are the same replicas routed `round_robin`, `least_busy` and `affinity`.
 * Ground truth comes from the edge's own `/metrics` (the prompt and cached prompt tokens llama-server reported per
 * replica, runs per replica); TTFT is the client's (to the first content chunk of the stream).
 */
import { execFileSync } from "node:child_process"
import { createParser } from "eventsource-parser"
import { serveConfig } from "../test/realup/edge.js"
import { envCount } from "./env.js"
import { freePort } from "./procs.js"
import { fixed, percentile, table } from "./table.js"

const REPLICAS = envCount("REPLICAS", 3)
const SLOTS = envCount("SLOTS", 2)
const TURNS = envCount("TURNS", 12)
/** Tokens, roughly (one per word of the generated text, as the Qwen vocabulary spells common English words). */
const SHARED = envCount("SHARED", 3_000)
const RESULT = envCount("RESULT", 1_000)
const MAX_TOKENS = envCount("MAX_TOKENS", 8)
/**
 * The agent's own time between turns (running the tool, reading its result), drawn from 0..`TOOL_MS` per turn
 * (seeded). 0 gives a closed loop, where least-busy happens to keep each session on its replica: with as many
 * sessions as slots and no gap, the replica a session just left is the least busy one when it asks again.
 */
const TOOL_MS = process.env["TOOL_MS"] === "0" ? 0 : envCount("TOOL_MS", 4_000)
const SESSIONS = REPLICAS * SLOTS
/** Context per slot: the whole session, with room for the template and the answers. */
const CTX_PER_SLOT = Math.ceil((SHARED + TURNS * (RESULT + MAX_TOKENS + 64) + 1_024) / 1_024) * 1_024

const HOME = process.env["REALUP_HOME"] ?? `${process.env["XDG_CACHE_HOME"] ?? `${process.env["HOME"]}/.cache`}/iop-realup`
const SCRIPTS = new URL("../../scripts/realup/", import.meta.url).pathname
const POLICIES = ["round_robin", "least_busy", "affinity"] as const
type Policy = (typeof POLICIES)[number]

// ---------------------------------------------------------------------------
// the trace: deterministic text

const WORDS = (
  "the of and to in is for on with as by at from this that it be are was or an not but all can has have will one " +
  "file code function return value type error test data line name path server client request response model node " +
  "run edge cache slot token prompt stream event route load write read build check state time list map set call " +
  "module import export class interface const let string number object array true false null await async result"
).split(" ")

/** A seeded generator (mulberry32): the same trace for every policy, bar the nonce. */
const rng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const text = (random: () => number, words: number): string => {
  const out: Array<string> = []
  for (let i = 0; i < words; i++) {
    out.push(WORDS[Math.floor(random() * WORDS.length)]!)
    if (i % 16 === 15) out.push("\n")
  }
  return out.join(" ")
}

interface Trace {
  readonly system: string
  readonly tools: ReadonlyArray<object>
  readonly tasks: ReadonlyArray<string>
  /** results[session][turn]: the file read that turn adds. */
  readonly results: ReadonlyArray<ReadonlyArray<string>>
  /** toolMs[session][turn]: the agent's time before its next turn. */
  readonly toolMs: ReadonlyArray<ReadonlyArray<number>>
}

const traceFor = (policy: Policy): Trace => {
  const random = rng(POLICIES.indexOf(policy) + 1)
  const toolCount = 8
  const toolWords = Math.floor(SHARED / 2 / toolCount)
  return {
    // The nonce first: nothing of one policy's prompts is a prefix of another's.
    system: `[${policy}] You are a coding agent working in a repository.\n${text(random, Math.floor(SHARED / 2))}`,
    tools: Array.from({ length: toolCount }, (_, i) => ({
      type: "function",
      function: {
        name: `tool_${i}`,
        description: text(random, toolWords),
        parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] }
      }
    })),
    tasks: Array.from({ length: SESSIONS }, (_, s) => `Session ${s}: ${text(random, 24)}`),
    results: Array.from({ length: SESSIONS }, (_, s) =>
      Array.from({ length: TURNS }, (_, t) => `Contents of src/session${s}/file${t}.ts:\n${text(random, RESULT)}`)),
    toolMs: Array.from({ length: SESSIONS }, () => Array.from({ length: TURNS }, () => Math.floor(random() * TOOL_MS)))
  }
}

// ---------------------------------------------------------------------------
// replicas and the edge

interface Replica {
  readonly port: number
  readonly url: string
}

const startReplicas = async (): Promise<ReadonlyArray<Replica>> => {
  const replicas: Array<Replica> = []
  for (let i = 0; i < REPLICAS; i++) {
    const port = await freePort()
    execFileSync(`${SCRIPTS}start.sh`, [String(port), "--cache-ram", "0"], {
      env: {
        ...process.env,
        REALUP_MODEL: `${HOME}/models/tiny-qwen.gguf`,
        REALUP_SLOTS: String(SLOTS),
        REALUP_CTX: String(SLOTS * CTX_PER_SLOT)
      },
      stdio: ["ignore", "inherit", "inherit"]
    })
    replicas.push({ port, url: `http://127.0.0.1:${port}/v1` })
  }
  return replicas
}

const stopReplicas = (replicas: ReadonlyArray<Replica>): void => {
  for (const r of replicas) {
    try {
      execFileSync(`${SCRIPTS}stop.sh`, [String(r.port)], { stdio: "ignore" })
    } catch {
      // Stopped already.
    }
  }
}

const startEdge = (replicas: ReadonlyArray<Replica>) =>
  serveConfig("bench:routing", {
    server: { apiKeys: [] },
    log: { level: "error" },
    models: POLICIES.map((routing) => ({
      id: routing,
      routing,
      provider: {
        type: "openai",
        model: "tiny",
        constraints: "none",
        baseUrls: replicas.map((r, i) => ({ url: r.url, name: `r${i}` }))
      }
    }))
  })

// ---------------------------------------------------------------------------
// one policy's run

interface Message {
  readonly role: "system" | "user" | "assistant"
  readonly content: string
}

/** One streamed request: its TTFT (to the first content) and the answer's text. */
const ask = async (edge: string, model: Policy, messages: ReadonlyArray<Message>, tools: ReadonlyArray<object>) => {
  const started = performance.now()
  const response = await fetch(`${edge}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages, tools, max_tokens: MAX_TOKENS, temperature: 0, stream: true })
  })
  if (!response.ok || response.body === null) throw new Error(`HTTP ${response.status}: ${await response.text()}`)
  let first: number | undefined
  let content = ""
  const parser = createParser({
    onEvent: (event) => {
      if (event.data === "[DONE]") return
      const chunk = JSON.parse(event.data) as { choices?: Array<{ delta?: { content?: string | null } }> }
      const delta = chunk.choices?.[0]?.delta?.content
      if (typeof delta === "string" && delta !== "") {
        first ??= performance.now()
        content += delta
      }
    }
  })
  const decoder = new TextDecoder()
  for await (const bytes of response.body) parser.feed(decoder.decode(bytes, { stream: true }))
  return { ttftMs: (first ?? performance.now()) - started, content }
}

/** A session's turns, one after another: each adds the answer and its next file read. */
const session = async (edge: string, policy: Policy, trace: Trace, s: number, ttfts: Array<number>) => {
  const messages: Array<Message> = [
    { role: "system", content: trace.system },
    { role: "user", content: trace.tasks[s]! }
  ]
  for (let t = 0; t < TURNS; t++) {
    const { ttftMs, content } = await ask(edge, policy, messages, trace.tools)
    ttfts.push(ttftMs)
    messages.push({ role: "assistant", content: content === "" ? "(no answer)" : content })
    if (TOOL_MS > 0) await new Promise((resolve) => setTimeout(resolve, trace.toolMs[s]![t]!))
    messages.push({ role: "user", content: trace.results[s]![t]! })
  }
}

/** The value of a `/metrics` sample, 0 when absent. */
const sample = (metrics: string, name: string, labels: string): number => {
  const line = metrics.split("\n").find((l) => l.startsWith(`${name}{${labels}}`))
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1))
}

interface PolicyResult {
  readonly policy: Policy
  readonly prompt: number
  readonly cached: number
  readonly ttfts: ReadonlyArray<number>
  readonly wallMs: number
  readonly perReplica: ReadonlyArray<number>
  readonly routes: Readonly<Record<string, number>>
}

const runPolicy = async (edge: string, policy: Policy): Promise<PolicyResult> => {
  const trace = traceFor(policy)
  const ttfts: Array<number> = []
  const started = performance.now()
  await Promise.all(Array.from({ length: SESSIONS }, (_, s) => session(edge, policy, trace, s, ttfts)))
  const wallMs = performance.now() - started
  const metrics = await (await fetch(`${edge}/metrics`)).text()
  let prompt = 0
  let cached = 0
  const perReplica: Array<number> = []
  const routes: Record<string, number> = {}
  for (let i = 0; i < REPLICAS; i++) {
    const node = `model="${policy}",node="${policy}@r${i}"`
    prompt += sample(metrics, "iop_node_prompt_tokens_total", node)
    cached += sample(metrics, "iop_node_cached_prompt_tokens_total", node)
    let runs = 0
    for (const route of ["affinity", "spill", "no_match", "only", "least_busy", "round_robin"]) {
      const n = sample(metrics, "iop_node_runs_total", `${node},route="${route}"`)
      runs += n
      if (n > 0) routes[route] = (routes[route] ?? 0) + n
    }
    perReplica.push(runs)
  }
  return { policy, prompt, cached, ttfts: ttfts.sort((a, b) => a - b), wallMs, perReplica, routes }
}

// ---------------------------------------------------------------------------

const main = async () => {
  console.log(
    `bench:routing — ${REPLICAS} llama-server replicas × ${SLOTS} slots (tiny-qwen, --cache-ram 0, ${CTX_PER_SLOT} ` +
      `tokens of context per slot), ${SESSIONS} sessions side by side, ${TURNS} turns each, shared prompt ~${SHARED} ` +
      `tokens, tool results ~${RESULT} tokens after 0-${TOOL_MS} ms of tool time, answers of ${MAX_TOKENS} tokens`
  )
  const replicas = await startReplicas()
  const stop = () => stopReplicas(replicas)
  process.once("SIGINT", () => {
    stop()
    process.exit(130)
  })
  try {
    const edge = await startEdge(replicas)
    const results: Array<PolicyResult> = []
    for (const policy of POLICIES) {
      const result = await runPolicy(edge.url, policy)
      console.log(`${policy}: ${fixed(result.wallMs / 1000, 1)} s`)
      results.push(result)
    }
    await edge.close()
    console.log("")
    console.log(table(
      ["policy", "prompt tok", "cached tok", "prefilled tok", "hit ratio", "TTFT p50 ms", "TTFT p95 ms", "wall s", "requests per replica", "routes"],
      results.map((r) => [
        r.policy,
        String(r.prompt),
        String(r.cached),
        String(r.prompt - r.cached),
        fixed(r.prompt === 0 ? Number.NaN : r.cached / r.prompt, 3),
        fixed(percentile(r.ttfts, 0.5), 0),
        fixed(percentile(r.ttfts, 0.95), 0),
        fixed(r.wallMs / 1000, 1),
        r.perReplica.join(" / "),
        Object.entries(r.routes).map(([k, v]) => `${k} ${v}`).join(", ")
      ])
    ))
    const by = (p: Policy) => results.find((r) => r.policy === p)!
    const affinity = by("affinity")
    const leastBusy = by("least_busy")
    const prefill = (r: PolicyResult) => r.prompt - r.cached
    const spread = Math.max(...affinity.perReplica) / Math.max(1, Math.min(...affinity.perReplica))
    console.log("")
    console.log(`affinity prefilled / least_busy prefilled: ${fixed(prefill(affinity) / prefill(leastBusy), 3)} (bar: ≤ 0.333)`)
    console.log(`TTFT p95 affinity vs least_busy: ${fixed(percentile(affinity.ttfts, 0.95), 0)} vs ${fixed(percentile(leastBusy.ttfts, 0.95), 0)} ms (bar: lower)`)
    console.log(`affinity requests, busiest / least busy replica: ${fixed(spread, 2)} (bar: ≤ 1.5)`)
  } finally {
    stop()
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
