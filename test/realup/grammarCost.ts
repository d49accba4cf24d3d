/**
 * What the compiled grammar costs llama.cpp: the same prompt and `max_tokens` straight to the llama-server (no edge),
 * with and without the `grammar` the edge would send, read from llama.cpp's own `timings`; and what compiling it
 * costs the edge.
 */
import { toolCallGrammar } from "../../src/providers/constraints/toolCallGrammar.js"
import { MAX_TOKENS, median } from "./matrix.js"
import type { SchemaFamily } from "./matrixFamilies.js"
import { toolsOf } from "./matrixFamilies.js"

export interface Timing {
  /** llama.cpp's `timings.predicted_per_second`. */
  readonly tokensPerSecond: number
  readonly predicted: number
  readonly promptMs: number
  /** The request's wall time at the client, ms. */
  readonly wallMs: number
}

export interface Cost {
  readonly family: string
  readonly grammarBytes: number
  /** Median of `toolCallGrammar` over the runs, ms. */
  readonly compileMs: number
  readonly with: ReadonlyArray<Timing>
  readonly without: ReadonlyArray<Timing>
}

/** The `required` grammar of a family's request, as the edge compiles it (text mode, Hermes markup). */
export const requiredGrammar = (family: SchemaFamily) =>
  toolCallGrammar({
    tools: toolsOf(family).map((t) => ({ function: { name: t.name, parameters: t.parameters } })),
    toolChoice: "required"
  })

const num = (v: unknown): number => (typeof v === "number" ? v : NaN)

const direct = async (upstream: string, family: SchemaFamily, seed: number, grammar: string | undefined): Promise<Timing> => {
  const started = performance.now()
  const response = await fetch(`${upstream}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "tiny",
      messages: [
        { role: "system", content: `Tools: ${JSON.stringify(toolsOf(family))}` },
        { role: "user", content: `${family.tool.description}, please.` }
      ],
      max_tokens: MAX_TOKENS,
      temperature: 1,
      seed,
      ...(grammar !== undefined ? { grammar } : {})
    }),
    signal: AbortSignal.timeout(120_000)
  })
  const body = (await response.json()) as { timings?: Record<string, unknown> }
  const wallMs = performance.now() - started
  if (response.status !== 200 || body.timings === undefined) throw new Error(`llama-server: HTTP ${response.status}`)
  return {
    tokensPerSecond: num(body.timings["predicted_per_second"]),
    predicted: num(body.timings["predicted_n"]),
    promptMs: num(body.timings["prompt_ms"]),
    wallMs
  }
}

const compileMs = (family: SchemaFamily, runs: number): number => {
  const times: Array<number> = []
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    requiredGrammar(family)
    times.push(performance.now() - t)
  }
  return median(times)
}

/** `n` requests with the grammar and `n` without, one at a time, alternating (so both see the same machine load). */
export const measureCost = async (upstream: string, family: SchemaFamily, n: number): Promise<Cost> => {
  const compiled = requiredGrammar(family)
  if (compiled._tag !== "Grammar") throw new Error(`${family.id}: no grammar (${compiled._tag})`)
  const withGrammar: Array<Timing> = []
  const without: Array<Timing> = []
  for (let i = 0; i < n; i++) {
    withGrammar.push(await direct(upstream, family, i + 1, compiled.grammar))
    without.push(await direct(upstream, family, i + 1, undefined))
  }
  return { family: family.id, grammarBytes: compiled.bytes, compileMs: compileMs(family, 200), with: withGrammar, without }
}

const fixed = (x: number, digits = 0): string => (Number.isFinite(x) ? x.toFixed(digits) : "—")

export const costTable = (costs: ReadonlyArray<Cost>): string => {
  const m = (ts: ReadonlyArray<Timing>, f: (t: Timing) => number) => median(ts.map(f))
  return [
    "| family | grammar bytes | tok/s without | tok/s with | with / without | tokens without | tokens with | prompt ms without / with | request ms with | edge compile ms | compile / request |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
    ...costs.map((c) => {
      const tw = m(c.with, (t) => t.tokensPerSecond)
      const to = m(c.without, (t) => t.tokensPerSecond)
      const wall = m(c.with, (t) => t.wallMs)
      return `| ${c.family} | ${c.grammarBytes} | ${fixed(to)} | ${fixed(tw)} | ${fixed((100 * tw) / to)} % | ` +
        `${fixed(m(c.without, (t) => t.predicted))} | ${fixed(m(c.with, (t) => t.predicted))} | ` +
        `${fixed(m(c.without, (t) => t.promptMs), 1)} / ${fixed(m(c.with, (t) => t.promptMs), 1)} | ${fixed(wall, 1)} | ` +
        `${fixed(c.compileMs, 3)} | ${fixed((100 * c.compileMs) / wall, 2)} % |`
    })
  ].join("\n")
}
