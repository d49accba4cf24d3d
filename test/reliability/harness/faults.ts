import { chunk, errorEvent, FAKE_MODEL, type Script, textStream } from "../../support/fakeUpstream.js"
import { type EdgeLike, idleViolations, readGauges, sleep } from "./edge.js"
import { chatUrl, type Exchange, percentile, pool, post, send, tally, verdict } from "./exchange.js"
import type { RequestEnd, TrackedUpstream } from "./upstream.js"

/**
 * The fault table: each fault must end in exactly one terminal outcome for
 * the client, leave no upstream request open, and bring `iop_active_runs` and
 * `iop_active_streams` back to 0.
 */

/** `runs.idleTimeoutMs` of the edge the stall faults run against. */
export const SHORT_IDLE_TIMEOUT_MS = 300
/**
 * `runs.idleTimeoutMs` of the edge the other faults run against: long enough
 * that a CPU-starved machine does not turn them into timeouts, short enough
 * that a lost terminal event still shows within the test.
 */
export const NORMAL_IDLE_TIMEOUT_MS = 5_000
export const UP = "up"

/** The config of an edge the faults run against: the fake upstream as model `up`. */
export const faultEdgeConfig = (upstreamUrl: string, idleTimeoutMs: number) => ({
  runs: { idleTimeoutMs },
  models: [
    { id: UP, provider: { type: "openai", baseUrl: upstreamUrl, model: FAKE_MODEL } },
    { id: "echo", provider: { type: "echo", tokenDelayMs: 0 } }
  ]
})

export interface FaultRow {
  readonly fault: string
  readonly trials: number
  /** Client outcomes, counted. */
  readonly outcomes: Record<string, number>
  /** How the upstream requests ended, counted (`open` is a violation). */
  readonly upstream: Record<string, number>
  /** For upstream requests the edge aborted: the largest delay after the client's end (or client abort), ms. */
  readonly maxAbortLagMs: number | undefined
  readonly violations: ReadonlyArray<string>
  readonly ms: number
  /** Figures particular to the row (client aborts, SIGTERM). */
  readonly note?: string
}

export interface FaultSpec {
  readonly id: string
  /** Run against the edge with the short idle timeout (stall faults). */
  readonly shortIdle: boolean
  readonly fault: string
  readonly stream: boolean
  readonly script: Script
  /** The client outcomes the contract allows (see exchange.ts `verdict`). */
  readonly allowed: ReadonlyArray<string>
  /** The error message must match. */
  readonly message?: RegExp
  /** How the upstream request may end. */
  readonly upstreamEnds: ReadonlyArray<RequestEnd>
  /**
   * Upstream requests per trial: exactly 1, or (stalls) at most 1 — a run may
   * time out before a starved edge's request reaches the upstream.
   */
  readonly upstreamRequests: "one" | "at most one"
}

const HEAD = [chunk({ role: "assistant", content: "" }), chunk({ content: "Hel" }), chunk({ content: "lo" })]
const TAIL = [chunk({ content: " world" }), chunk({ finish_reason: "stop" })]

const RUN_ERROR = ["sse:error:run_error", "http:502:run_error"]
/** A fault the upstream reported must fail the run at once, not by running into the idle timeout. */
const NOT_TIMEOUT = /^(?!run timed out$)[\s\S]+$/

const both = (
  id: string,
  fault: string,
  script: Script,
  rest: {
    readonly stream: ReadonlyArray<string>
    readonly json: ReadonlyArray<string>
    readonly message?: RegExp
    readonly upstreamEnds: ReadonlyArray<RequestEnd>
    readonly shortIdle?: boolean
  }
): Array<FaultSpec> => {
  const common = {
    script,
    upstreamEnds: rest.upstreamEnds,
    shortIdle: rest.shortIdle === true,
    upstreamRequests: rest.shortIdle === true ? ("at most one" as const) : ("one" as const),
    ...(rest.message !== undefined ? { message: rest.message } : {})
  }
  return [
    { id: `${id}-s`, fault: `${fault} (stream)`, stream: true, allowed: rest.stream, ...common },
    { id: `${id}-j`, fault: `${fault} (non-stream)`, stream: false, allowed: rest.json, ...common }
  ]
}

export const FAULTS: ReadonlyArray<FaultSpec> = [
  ...both("reset", "upstream TCP reset mid-stream", { kind: "reset", before: HEAD }, {
    stream: RUN_ERROR,
    json: ["http:502:run_error"],
    message: NOT_TIMEOUT,
    upstreamEnds: ["reset"]
  }),
  ...both("garbage", "upstream garbage SSE line", { kind: "sse", events: [...HEAD, "data: this is not json {\n\n", ...TAIL] }, {
    stream: RUN_ERROR,
    json: ["http:502:run_error"],
    message: NOT_TIMEOUT,
    upstreamEnds: ["completed", "aborted"]
  }),
  ...both("errevent", "upstream JSON error event mid-stream", { kind: "sse", events: [...HEAD, { error: { message: "boom" } }, ...TAIL] }, {
    stream: RUN_ERROR,
    json: ["http:502:run_error"],
    message: /boom/,
    upstreamEnds: ["completed", "aborted"]
  }),
  ...both("http500", "upstream 500 before the stream", {
    kind: "json",
    status: 500,
    body: errorEvent("upstream exploded", "server_error")
  }, { stream: RUN_ERROR, json: ["http:502:run_error"], message: /upstream exploded|500/, upstreamEnds: ["completed"] }),
  ...both("http429", "upstream 429 before the stream", {
    kind: "json",
    status: 429,
    body: errorEvent("upstream rate limited", "rate_limit_error")
  }, {
    // An upstream 429 keeps its meaning (it is answered before anything was written, stream or not).
    stream: ["http:429:rate_limit_error"],
    json: ["http:429:rate_limit_error"],
    message: /upstream rate limited/,
    upstreamEnds: ["completed"]
  }),
  ...both("stall", "upstream stall after a token (idle timeout)", { kind: "stall", before: HEAD }, {
    stream: ["sse:error:run_error", "http:504:timeout"],
    json: ["http:504:timeout"],
    message: /^run timed out$/,
    upstreamEnds: ["aborted"],
    shortIdle: true
  }),
  ...both("stall0", "upstream stall before any event (idle timeout)", { kind: "stall", before: [] }, {
    stream: ["sse:error:run_error", "http:504:timeout"],
    json: ["http:504:timeout"],
    message: /^run timed out$/,
    upstreamEnds: ["aborted"],
    shortIdle: true
  }),
  ...both("eof", "upstream ends without finish chunk or [DONE]", { kind: "sse", events: HEAD, done: false }, {
    stream: ["sse:finish:stop", "sse:error:run_error", "http:502:run_error"],
    json: ["json:finish:stop", "http:502:run_error"],
    message: NOT_TIMEOUT,
    upstreamEnds: ["completed"]
  })
]

const body = (model: string, key: string, stream: boolean) => ({
  model,
  stream,
  messages: [{ role: "user", content: key }]
})

/**
 * Waits until the edge is idle (`iop_active_runs` and `iop_active_streams` 0)
 * and no upstream request under `prefix` is open, at most `timeoutMs` (a
 * hang guard: what comes after reports what is still open). When every key
 * of `each` must reach the upstream, that is the end; otherwise the quiet
 * must last `stableMs`, since a request the edge is still reading may reach
 * the upstream late.
 */
const settle = async (
  edge: EdgeLike,
  upstream: TrackedUpstream,
  prefix: string,
  each: ReadonlyArray<string> | undefined,
  timeoutMs = 10_000,
  stableMs = 300
) => {
  const deadline = Date.now() + timeoutMs
  let quietSince: number | undefined
  while (Date.now() < deadline) {
    const g = await readGauges(edge.url).catch(() => undefined)
    const quiet = g !== undefined && g.runs === 0 && g.streams === 0 && upstream.open(prefix).length === 0
    if (quiet && each !== undefined && each.every((key) => upstream.requestsFor(key).some((r) => r.key === key))) return
    if (!quiet) quietSince = undefined
    else if (quietSince === undefined) quietSince = Date.now()
    else if (Date.now() - quietSince >= stableMs) return
    await sleep(50)
  }
}

const MAX_VIOLATIONS = 20

const cap = (v: Array<string>): Array<string> =>
  v.length > MAX_VIOLATIONS ? [...v.slice(0, MAX_VIOLATIONS), `… and ${v.length - MAX_VIOLATIONS} more`] : v

/**
 * The contract's bound on how soon an upstream request is aborted once its run is over (the client left, or got
 * its error): 1 s. The soak checks it; `npm test`'s tier passes `Infinity` and checks only that the abort comes.
 */
export const ABORT_LAG_BUDGET_MS = 1_000

/** Runs `trials` requests of one fault (at most `concurrency` at once) and checks them. */
export const runFault = async (
  edge: EdgeLike,
  upstream: TrackedUpstream,
  spec: FaultSpec,
  trials: number,
  concurrency = 8,
  options: { readonly abortLagBudgetMs?: number } = {}
): Promise<FaultRow> => {
  const budget = options.abortLagBudgetMs ?? ABORT_LAG_BUDGET_MS
  const started = Date.now()
  const prefix = `${spec.id}:`
  upstream.prefix(prefix, spec.script)
  const violations: Array<string> = []
  const results = await pool(trials, concurrency, async (i) => {
    const key = `${prefix}${i}`
    const ex = await send(chatUrl(edge.baseURL), body(UP, key, spec.stream), { timeoutMs: 15_000 })
    return { key, ex, v: verdict(ex) }
  })
  for (const { key, ex, v } of results) {
    for (const s of v.violations) violations.push(`${key}: ${s}`)
    if (!spec.allowed.includes(v.outcome)) {
      violations.push(`${key}: outcome ${v.outcome}, expected one of ${spec.allowed.join(" | ")}: ${ex.body.slice(0, 300)}`)
    }
    if (spec.message !== undefined && v.errorMessage !== undefined && !spec.message.test(v.errorMessage)) {
      violations.push(`${key}: error message ${JSON.stringify(v.errorMessage)} does not match ${spec.message}`)
    }
  }
  await settle(edge, upstream, prefix, spec.upstreamRequests === "one" ? results.map((r) => r.key) : undefined)
  const ends: Array<string> = []
  const lags: Array<number> = []
  for (const { key, ex } of results) {
    const reqs = upstream.requestsFor(key).filter((r) => r.key === key)
    if (reqs.length > 1 || (reqs.length === 0 && spec.upstreamRequests === "one")) {
      violations.push(`${key}: ${reqs.length} upstream requests, expected ${spec.upstreamRequests}`)
    }
    if (reqs.length === 0) ends.push("never sent")
    for (const r of reqs) {
      ends.push(r.end)
      if (r.end === "open") violations.push(`${key}: upstream request still open ${Date.now() - r.startedAt} ms after it started`)
      else if (!spec.upstreamEnds.includes(r.end)) violations.push(`${key}: upstream request ${r.end}, expected ${spec.upstreamEnds.join(" | ")}`)
      if (r.end === "aborted" && r.endedAt !== undefined) {
        // The run had failed by the time the client got its answer: the abort must follow within the budget.
        const lag = r.endedAt - ex.endedAt
        lags.push(lag)
        if (lag > budget) violations.push(`${key}: upstream request aborted ${lag} ms after the client's response ended (contract: within ${budget} ms)`)
      }
    }
  }
  violations.push(...(await idleViolations(edge.url, spec.fault)))
  return {
    fault: spec.fault,
    trials,
    outcomes: tally(results.map((r) => r.v.outcome)),
    upstream: tally(ends),
    maxAbortLagMs: lags.length > 0 ? Math.max(...lags) : undefined,
    violations: cap(violations),
    ms: Date.now() - started
  }
}

/** A small seeded PRNG (mulberry32), for reproducible random delays. */
export const prng = (seed: number) => {
  let a = seed >>> 0
  return (): number => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

export const ABORT_SCRIPT_TOKENS = 60
export const ABORT_SCRIPT_DELAY_MS = 20

/**
 * `trials` streaming requests through the fake upstream, each aborted by the
 * client after a random 0–50 ms. The upstream script lasts `upstreamTokens`
 * × 20 ms (default 60: 1.2 s), so an upstream request that completes was not
 * cancelled within that time of its client leaving: a violation, like one
 * left open, or one aborted more than `abortLagBudgetMs` (default 1 s) after
 * the client left. With a budget of `Infinity` and a script longer than the
 * test may run, only the events count: every upstream request is aborted.
 */
export const clientAbortTrials = async (
  edge: EdgeLike,
  upstream: TrackedUpstream,
  trials: number,
  options: {
    readonly concurrency?: number
    readonly seed?: number
    readonly maxDelayMs?: number
    readonly abortLagBudgetMs?: number
    readonly upstreamTokens?: number
  } = {}
): Promise<
  FaultRow & {
    readonly seed: number
    readonly p99AbortLagMs: number | undefined
    readonly reachedUpstream: number
    readonly startedAfterClientLeft: number
    readonly maxSinceClientLeftMs: number | undefined
  }
> => {
  const started = Date.now()
  const seed = options.seed ?? 20_261_130
  const random = prng(seed)
  const maxDelay = options.maxDelayMs ?? 50
  const budget = options.abortLagBudgetMs ?? ABORT_LAG_BUDGET_MS
  const delays = Array.from({ length: trials }, () => Math.floor(random() * (maxDelay + 1)))
  const prefix = `abort-${seed}-${started}:`
  upstream.prefix(prefix, {
    kind: "sse",
    delayMs: ABORT_SCRIPT_DELAY_MS,
    events: textStream(Array.from({ length: options.upstreamTokens ?? ABORT_SCRIPT_TOKENS }, (_, i) => `t${i} `))
  })
  const violations: Array<string> = []
  const results = await pool(trials, options.concurrency ?? 8, async (i) => {
    const key = `${prefix}${i}`
    const ex = await send(chatUrl(edge.baseURL), body(UP, key, true), { abortAfterMs: delays[i]!, timeoutMs: 15_000 })
    return { key, ex, v: verdict(ex) }
  })
  for (const { key, ex, v } of results) {
    for (const s of v.violations) violations.push(`${key}: ${s}`)
    if (v.outcome !== "client-aborted") violations.push(`${key}: the client's abort after ${delays[Number(key.slice(prefix.length))]} ms did not take: ${v.outcome} ${ex.body.slice(0, 200)}`)
  }
  await settle(edge, upstream, prefix, undefined)
  const ends: Array<string> = []
  /** Upstream end − the later of (client abort, upstream request start): the cancellation latency the contract bounds. */
  const lags: Array<number> = []
  /** Upstream end − client abort, whenever the upstream request started. */
  const sinceClient: Array<number> = []
  let reached = 0
  let startedAfterClientLeft = 0
  for (const { key, ex } of results) {
    const reqs = upstream.requestsFor(key).filter((r) => r.key === key)
    if (reqs.length === 0) ends.push("never sent")
    if (reqs.length > 1) violations.push(`${key}: ${reqs.length} upstream requests, expected at most 1`)
    const leftAt = ex.abortedAt ?? ex.endedAt
    for (const r of reqs) {
      reached++
      ends.push(r.end)
      if (r.startedAt > leftAt) startedAfterClientLeft++
      if (r.end === "open") violations.push(`${key}: upstream request still open ${Date.now() - r.startedAt} ms after it started`)
      else if (r.end !== "aborted") violations.push(`${key}: upstream request ${r.end} although its client left after ${ex.ms} ms`)
      else if (r.endedAt !== undefined) {
        const lag = r.endedAt - Math.max(leftAt, r.startedAt)
        lags.push(lag)
        sinceClient.push(r.endedAt - leftAt)
        if (lag > budget) {
          violations.push(`${key}: upstream request aborted ${lag} ms after the client left (contract: within ${budget} ms)`)
        }
      }
    }
  }
  violations.push(...(await idleViolations(edge.url, "client abort", 5_000)))
  return {
    fault: `client abort at a random 0–${maxDelay} ms (stream)`,
    trials,
    seed,
    outcomes: tally(results.map((r) => r.v.outcome)),
    upstream: tally(ends),
    reachedUpstream: reached,
    startedAfterClientLeft,
    maxSinceClientLeftMs: sinceClient.length > 0 ? Math.max(...sinceClient) : undefined,
    maxAbortLagMs: lags.length > 0 ? Math.max(...lags) : undefined,
    p99AbortLagMs: lags.length > 0 ? percentile(lags, 99) : undefined,
    violations: cap(violations),
    ms: Date.now() - started,
    note:
      `${reached} reached the upstream (${startedAfterClientLeft} of them after the client had left); ` +
      `abort lag p99 ${lags.length > 0 ? percentile(lags, 99) : "—"} ms, max ${lags.length > 0 ? Math.max(...lags) : "—"} ms ` +
      `(from the client leaving: max ${sinceClient.length > 0 ? Math.max(...sinceClient) : "—"} ms)`
  }
}

const words = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(" ")

/** The config of the edge SIGTERM is sent to: slow echo streams, a short grace period. */
export const sigtermEdgeConfig = (graceMs: number) => ({
  server: { shutdownGraceMs: graceMs },
  models: [{ id: "echo", provider: { type: "echo", tokenDelayMs: 20 } }]
})

interface OpenStream {
  readonly firstContent: Promise<boolean>
  readonly done: Promise<Exchange>
}

const CONTENT_TOKEN = /"content":"[^"]/

/** Opens a stream and reads it to its end in the background; `firstContent` resolves at its first non-empty content. */
const openStream = (url: string, payload: object, timeoutMs: number): OpenStream => {
  let seen: (ok: boolean) => void = () => undefined
  const firstContent = new Promise<boolean>((resolve) => (seen = resolve))
  const started = Date.now()
  const done = (async (): Promise<Exchange> => {
    let raw = ""
    try {
      const response = await post(url, JSON.stringify(payload), { "content-type": "application/json" }, AbortSignal.timeout(timeoutMs), (text) => {
        raw = text
        if (CONTENT_TOKEN.test(text.slice(-4_096))) seen(true)
      })
      seen(false)
      return { status: response.status, contentType: response.contentType, body: response.body, error: undefined, clientAborted: false, abortedAt: undefined, startedAt: started, endedAt: Date.now(), ms: Date.now() - started }
    } catch (e) {
      seen(false)
      const code = typeof (e as { code?: unknown })?.code === "string" ? ` (${(e as { code: string }).code})` : ""
      return { status: 0, contentType: "", body: raw, error: `${String(e)}${code}`, clientAborted: false, abortedAt: undefined, startedAt: started, endedAt: Date.now(), ms: Date.now() - started }
    }
  })()
  return { firstContent, done }
}

/**
 * Opens `n` echo streams (half short enough to finish within the grace
 * period, half far longer), waits until each has content (at most
 * `openWaitMs`), sends SIGTERM: every client whose stream was open gets a
 * well-formed end (finish, or `run_error` then [DONE]), and the edge exits 0.
 * A stream that had no content yet when SIGTERM came (a starved edge) may
 * also be refused (503 `service_unavailable`); it must not be cut off.
 */
export const sigtermDuringStreams = async (
  start: (config: object) => Promise<EdgeLike>,
  n: number,
  graceMs = 1_000,
  openWaitMs = 30_000
): Promise<FaultRow & { readonly exitCode: number | null | string; readonly exitMs: number; readonly openAtSigterm: number }> => {
  const started = Date.now()
  const edge = await start(sigtermEdgeConfig(graceMs))
  const violations: Array<string> = []
  const opened = new Set<number>()
  const streams = Array.from({ length: n }, (_, i) => {
    const s = openStream(
      chatUrl(edge.baseURL),
      { model: "echo", stream: true, messages: [{ role: "user", content: i % 2 === 0 ? words(6, "s") : words(400, "long") }] },
      60_000 + openWaitMs
    )
    void s.firstContent.then((ok) => ok && opened.add(i))
    return s
  })
  const all = await Promise.race([
    Promise.all(streams.map((s) => s.firstContent)).then(() => true),
    sleep(openWaitMs).then(() => false)
  ])
  const openAtSigterm = opened.size
  if (!all) violations.push(`only ${openAtSigterm} of ${n} streams had content within ${openWaitMs} ms`)
  const signalledAt = Date.now()
  edge.proc.kill("SIGTERM")
  const exchanges = await Promise.all(streams.map((s) => s.done))
  const exitCode = await Promise.race([edge.exited, sleep(15_000).then(() => "still running 15 s after SIGTERM")])
  const exitMs = Date.now() - signalledAt
  if (exitCode !== 0) violations.push(`exit code ${String(exitCode)}, expected 0`)
  if (typeof exitCode === "string") await edge.stop("SIGKILL")
  const outcomes: Array<string> = []
  exchanges.forEach((ex, i) => {
    const v = verdict(ex)
    const wasOpen = opened.has(i) && ex.startedAt < signalledAt
    outcomes.push(wasOpen ? v.outcome : `not yet open: ${v.outcome}`)
    for (const s of v.violations) violations.push(`stream ${i}: ${s}`)
    const allowed = ["sse:finish:stop", "sse:error:run_error", ...(wasOpen ? [] : ["http:503:service_unavailable"])]
    if (!allowed.includes(v.outcome)) violations.push(`stream ${i}${wasOpen ? "" : " (no content yet at SIGTERM)"}: outcome ${v.outcome}, expected ${allowed.join(" | ")}`)
  })
  return {
    fault: `SIGTERM during ${n} open streams (grace ${graceMs} ms)`,
    trials: n,
    outcomes: tally(outcomes),
    upstream: {},
    maxAbortLagMs: undefined,
    violations: cap(violations),
    ms: Date.now() - started,
    exitCode,
    exitMs,
    openAtSigterm,
    note: `${openAtSigterm}/${n} open at SIGTERM; exit ${String(exitCode)} ${exitMs} ms after SIGTERM`
  }
}
