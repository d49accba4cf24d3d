import { textStream } from "../../support/fakeUpstream.js"
import { type EdgeLike, readGauges, sleep, waitIdle } from "./edge.js"
import { chatUrl, percentile, send, tally, verdict } from "./exchange.js"
import type { TrackedUpstream } from "./upstream.js"

/**
 * `concurrency` clients, each streaming one chat completion after another
 * until the phase's time is up: every stream must be well-formed (see
 * exchange.ts) and carry exactly the expected text; afterwards the edge must
 * come back to `iop_active_runs 0` / `iop_active_streams 0`.
 */

export const SOAK_WORDS = 20
export const SOAK_TOKEN_DELAY_MS = 20

/** The config of the soak edge: echo with a token delay, and the fake upstream as `up`. */
export const soakEdgeConfig = (upstreamUrl: string) => ({
  runs: { idleTimeoutMs: 60_000 },
  models: [
    { id: "echo", provider: { type: "echo", tokenDelayMs: SOAK_TOKEN_DELAY_MS } },
    { id: "up", provider: { type: "openai", baseUrl: upstreamUrl, model: "fake-model" } }
  ]
})

const upstreamTokens = (n: number) => Array.from({ length: n }, (_, i) => `tok${i} `)

/** Registers the upstream script of the soak (keys `soak:*`): `words` tokens, 20 ms apart, usage at the end. */
export const scriptSoakUpstream = (upstream: TrackedUpstream, words = SOAK_WORDS): void => {
  upstream.prefix("soak:", {
    kind: "sse",
    delayMs: SOAK_TOKEN_DELAY_MS,
    events: textStream(upstreamTokens(words), { usage: { prompt_tokens: 5, completion_tokens: words, total_tokens: words + 5 } })
  })
}

export interface PhaseResult {
  readonly phase: string
  readonly model: string
  readonly concurrency: number
  readonly seconds: number
  /** Streams completed (read to their end). */
  readonly streams: number
  /** Streams that were not well-formed or did not carry the expected text. */
  readonly failed: number
  readonly outcomes: Record<string, number>
  readonly violations: ReadonlyArray<string>
  readonly contentTokens: number
  readonly tokensPerSecond: number
  readonly streamsPerSecond: number
  /** Client streams open at once, over the per-second samples of the steady part of the phase. */
  readonly heldMin: number
  readonly heldMax: number
  /** `iop_active_streams` over the same samples. */
  readonly edgeActiveStreamsMax: number
  /** The edge's largest event-loop delay over the phase (per-second scrapes of `iop_nodejs_eventloop_lag_max_seconds`), ms. */
  readonly eventLoopLagMaxMs: number
  readonly streamMs: { readonly p50: number; readonly p99: number; readonly max: number }
  /** Time from the end of the phase until `iop_active_runs` and `iop_active_streams` were both 0. */
  readonly idleAfterMs: number | undefined
  readonly upstreamEnds: Record<string, number> | undefined
}

const echoText = (i: number, n: number) => Array.from({ length: n }, (_, k) => `w${i}x${k}`).join(" ")

/** Runs one phase: `concurrency` workers stream back to back for `seconds`, then waits for the edge to be idle. */
export const holdStreams = async (
  edge: EdgeLike,
  options: {
    readonly phase: string
    readonly model: "echo" | "up"
    readonly concurrency: number
    readonly seconds: number
    readonly upstream?: TrackedUpstream
    /** Words (tokens) per stream; for `up`, as given to `scriptSoakUpstream` (default 20). */
    readonly words?: number
    /** Called every second with the samples (progress output). */
    readonly onTick?: (tick: { readonly t: number; readonly open: number; readonly done: number; readonly edgeStreams: number }) => void
  }
): Promise<PhaseResult> => {
  const started = Date.now()
  const deadline = started + options.seconds * 1_000
  const n = options.words ?? SOAK_WORDS
  const expectedUpstream = upstreamTokens(n).join("")
  const violations: Array<string> = []
  const outcomes: Array<string> = []
  const durations: Array<number> = []
  let failed = 0
  let open = 0
  let done = 0
  let tokens = 0
  let serial = 0
  const held: Array<number> = []
  const edgeStreams: Array<number> = []
  let lagMax = 0
  // The steady part: after the ramp-up (2 s, or the first half of a shorter phase), before the deadline.
  const rampMs = Math.min(2_000, (options.seconds * 1_000) / 2)
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      await sleep(1_000)
      if (!sampling) break
      const g = await readGauges(edge.url).catch(() => ({ runs: Number.NaN, streams: Number.NaN, loopLagMaxSeconds: Number.NaN }))
      if (Number.isFinite(g.loopLagMaxSeconds)) lagMax = Math.max(lagMax, g.loopLagMaxSeconds)
      const t = Date.now() - started
      if (t > rampMs && Date.now() < deadline && !Number.isNaN(g.streams)) edgeStreams.push(g.streams)
      options.onTick?.({ t, open, done, edgeStreams: g.streams })
    }
  })()

  // Streams held open, sampled locally: a scrape of a busy edge may take longer than a short phase's window.
  const holding = setInterval(() => {
    const t = Date.now() - started
    if (t > rampMs && Date.now() < deadline) held.push(open)
  }, 200)

  const worker = async () => {
    while (Date.now() < deadline) {
      const i = serial++
      const content = options.model === "echo" ? echoText(i, n) : `soak:${i}`
      const expected = options.model === "echo" ? content : expectedUpstream
      open++
      const ex = await send(chatUrl(edge.baseURL), { model: options.model, stream: true, messages: [{ role: "user", content }] }, { timeoutMs: 120_000 })
      open--
      done++
      durations.push(ex.ms)
      const v = verdict(ex)
      outcomes.push(v.outcome)
      const problems = [...v.violations]
      if (v.outcome !== "sse:finish:stop") problems.push(`outcome ${v.outcome}${v.errorMessage !== undefined ? `: ${v.errorMessage}` : ""}`)
      else if (v.content !== expected) problems.push(`content ${JSON.stringify(v.content.slice(0, 80))} is not ${JSON.stringify(expected.slice(0, 80))}`)
      if (problems.length > 0) {
        failed++
        if (violations.length < 20) violations.push(`${options.phase} stream ${i}: ${problems.join("; ")}`)
      } else {
        tokens += n
      }
    }
  }
  await Promise.all(Array.from({ length: options.concurrency }, worker))
  const endedAt = Date.now()
  sampling = false
  clearInterval(holding)
  await sampler
  const idle = await waitIdle(edge.url, 30_000)
  if (!idle.idle) violations.push(`${options.phase}: ${idle.waitedMs} ms after the last stream iop_active_runs=${idle.runs} iop_active_streams=${idle.streams}`)
  let upstreamEnds: Record<string, number> | undefined
  if (options.upstream !== undefined) {
    const up = options.upstream
    const settleBy = Date.now() + 5_000
    while (up.open("soak:").length > 0 && Date.now() < settleBy) await sleep(50)
    const openLeft = up.open("soak:").length
    if (openLeft > 0) violations.push(`${options.phase}: ${openLeft} upstream requests still open`)
    upstreamEnds = tally(up.requestsFor("soak:").map((r) => r.end))
    up.clear()
  }
  const seconds = (endedAt - started) / 1_000
  return {
    phase: options.phase,
    model: options.model,
    concurrency: options.concurrency,
    seconds,
    streams: done,
    failed,
    outcomes: tally(outcomes),
    violations,
    contentTokens: tokens,
    tokensPerSecond: tokens / seconds,
    streamsPerSecond: done / seconds,
    heldMin: held.length > 0 ? Math.min(...held) : Number.NaN,
    heldMax: held.length > 0 ? Math.max(...held) : Number.NaN,
    edgeActiveStreamsMax: edgeStreams.length > 0 ? Math.max(...edgeStreams) : Number.NaN,
    eventLoopLagMaxMs: lagMax * 1_000,
    streamMs: { p50: percentile(durations, 50), p99: percentile(durations, 99), max: durations.reduce((m, d) => Math.max(m, d), 0) },
    idleAfterMs: idle.idle ? idle.waitedMs : undefined,
    upstreamEnds
  }
}
