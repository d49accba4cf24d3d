/**
 * Issue 21's "Done when" table, through the real llama-server and the random-weight model: {auto, required, named}
 * × five schema families × N requests on each API, streamed and not, `parallel_tool_calls: false` on half of them.
 * The constrained model is asserted (every call schema-valid at the first attempt, the choice honoured N of N, one
 * call when asked, zero replays); the unconstrained and upstream-native models beside it are only measured. Then
 * llama.cpp's tok/s with and without the grammar. The tables go to stdout and to a file.
 *
 * Env: REALUP_MATRIX_N (20: requests per asserted row), REALUP_MATRIX_BEFORE_N (4: per measured row; each of their
 * `required`/named requests is two full-length attempts), REALUP_MATRIX_COST_N (20), REALUP_MATRIX_CALL_BIAS (5:
 * the Chat `auto` rows' logit bias toward `<tool_call>`, 0: none), REALUP_MATRIX_OUT (default
 * `<tmpdir>/iop-realup-matrix.md`).
 */
import { writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest"
import { toolCallGrammar } from "../../src/providers/constraints/toolCallGrammar.js"
import { APIS, Refused, send } from "./apis.js"
import { type ModelEntry, type RealEdge, startEdge } from "./edge.js"
import { type Cost, costTable, measureCost } from "./grammarCost.js"
import {
  type Answer,
  bodyOf,
  CHOICES,
  detailTable,
  judge,
  type Measured,
  type Row,
  samples,
  shot,
  summaryTable,
  tally
} from "./matrix.js"
import { SCHEMA_FAMILIES, toolsOf } from "./matrixFamilies.js"

/**
 * The constrained model's config: the one place to change. Today the edge compiles the grammar in text mode only;
 * once it constrains native tools too, this becomes the plain config (`constraints` omitted: auto; native tools).
 */
const CONSTRAINED: Omit<ModelEntry, "id"> = { constraints: "llama.cpp", tools: "text", strict: true }

interface Config {
  readonly name: string
  readonly model: ModelEntry
  /** Asserted, or only measured (the "before" rows). */
  readonly asserted: boolean
  /** Requests per row. */
  readonly n: number
}

const N = Number(process.env["REALUP_MATRIX_N"] ?? "20")
const BEFORE_N = Number(process.env["REALUP_MATRIX_BEFORE_N"] ?? "4")

const CONFIGS: ReadonlyArray<Config> = [
  { name: "constrained", model: { id: "constrained", ...CONSTRAINED }, asserted: true, n: N },
  {
    name: "unconstrained (text)",
    model: { id: "unconstrained", constraints: "none", tools: "text", strict: true },
    asserted: false,
    n: BEFORE_N
  },
  {
    name: "upstream-native",
    model: { id: "native", constraints: "none", tools: "native", strict: true },
    asserted: false,
    n: BEFORE_N
  }
]

const COST_N = Number(process.env["REALUP_MATRIX_COST_N"] ?? "20")
const CALL_BIAS = Number(process.env["REALUP_MATRIX_CALL_BIAS"] ?? "5")
/** Requests of a row in flight at once: the server's slots (globalSetup's REALUP_SLOTS). */
const CONCURRENCY = Number(process.env["REALUP_SLOTS"] ?? "4")
const OUT = process.env["REALUP_MATRIX_OUT"] ?? join(tmpdir(), "iop-realup-matrix.md")

const upstream = inject("realupUpstream")
let edge: RealEdge | undefined
const url = (): string => {
  if (edge === undefined) throw new Error("no edge")
  return edge.url
}
const measured: Array<Measured> = []
/** Chat Completions' `auto` rows: `logit_bias` toward the model's `<tool_call>` token (its id from `/tokenize`). */
let callBias: Record<string, number> | undefined
const costs: Array<Cost> = []
const started = performance.now()

beforeAll(async () => {
  edge = await startEdge(upstream, CONFIGS.map((c) => c.model))
  const tokenized = await fetch(`${upstream.replace(/\/v1\/?$/, "")}/tokenize`, {
    method: "POST",
    body: JSON.stringify({ content: "<tool_call>", parse_special: true })
  })
  const { tokens } = (await tokenized.json()) as { tokens: ReadonlyArray<number> }
  // One token in tiny.gguf's vocabulary; +5 opens a call in most answers, after some text or at once.
  if (tokens.length === 1 && CALL_BIAS !== 0) callBias = { [String(tokens[0])]: CALL_BIAS }
})

afterAll(async () => {
  await edge?.close()
  const seconds = ((performance.now() - started) / 1000).toFixed(0)
  const gaps = [...new Set(measured.flatMap((m) => m.tally.unconstrained.map((p) => `${m.tally.row.family.id}: ${p}`)))]
  const text = [
    `# Strict at the source, measured (${N} requests per constrained row, ${BEFORE_N} per other row; ${seconds} s)`,
    "",
    "## Summed over the five schema families",
    "",
    `Chat Completions' \`auto\` rows send \`logit_bias\` ${JSON.stringify(callBias ?? null)} (toward \`<tool_call>\`); ` +
    "requests alternate JSON and SSE; `parallel_tool_calls: false` (Messages: `disable_parallel_tool_use`) on two in four.",
    "",
    summaryTable(measured),
    "",
    "## llama.cpp's cost of the grammar (`required`, direct to llama-server, medians of " + COST_N + ")",
    "",
    costTable(costs),
    "",
    "## Schema parts the grammar leaves to validation",
    "",
    ...(gaps.length === 0 ? ["none"] : gaps.map((g) => `- ${g}`)),
    "",
    "## Every row",
    "",
    detailTable(measured),
    "",
    "## The first refusal of each row that had one",
    "",
    ...samples(measured),
    ""
  ].join("\n")
  writeFileSync(OUT, text)
  console.log(`${text}\n(written to ${OUT})`)
})

/** The edge's `iop_tool_validation_total{result="retry"}` of one model. */
const replays = async (model: string): Promise<number> => {
  const text = await (await fetch(`${url()}/metrics`)).text()
  const line = text.split("\n").find((l) =>
    l.startsWith("iop_tool_validation_total{") && l.includes(`model="${model}"`) && l.includes(`result="retry"`)
  )
  return line === undefined ? 0 : Number(line.split(" ").at(-1))
}

const answer = async (row: Row, index: number): Promise<Answer> => {
  const s = shot(index)
  try {
    return { _tag: "Answered", outcome: await send(url(), row.api, s.stream, bodyOf(row, s, callBias)) }
  } catch (e) {
    if (e instanceof Refused) return { _tag: "Refused", status: e.status, body: e.body }
    throw e
  }
}

/** Every request of a row, `CONCURRENCY` at a time, in index order. */
const runRow = async (row: Row, n: number): Promise<ReadonlyArray<Answer>> => {
  const answers: Array<Answer> = []
  for (let from = 0; from < n; from += CONCURRENCY) {
    const indices = Array.from({ length: Math.min(CONCURRENCY, n - from) }, (_, k) => from + k)
    answers.push(...(await Promise.all(indices.map((i) => answer(row, i)))))
  }
  return answers
}

/** What the edge's compiler leaves to validation for this row's request (empty: the grammar holds every keyword). */
const leftToValidation = (row: Row): ReadonlyArray<string> => {
  const compiled = toolCallGrammar({
    tools: toolsOf(row.family).map((t) => ({ function: { name: t.name, parameters: t.parameters } })),
    toolChoice: row.choice === "named" ? { function: { name: row.family.tool.name } } : row.choice
  })
  return compiled._tag === "Grammar" ? compiled.unconstrained : [`whole grammar: ${compiled._tag}`]
}

const rowsOf = (config: Config): ReadonlyArray<readonly [string, Row]> =>
  APIS.flatMap((api) =>
    SCHEMA_FAMILIES.flatMap((family) =>
      CHOICES.map((choice): readonly [string, Row] => [`${api} ${family.id} ${choice}`, { model: config.model.id, api, family, choice }])
    )
  )

describe.each(CONFIGS.map((c) => [c.name, c] as const))("%s", (_, config) => {
  it.each(rowsOf(config))("%s", async (_, row) => {
    const before = await replays(row.model)
    const answers = await runRow(row, config.n)
    const verdicts = answers.map((a, i) => [shot(i), judge(row, shot(i), a)] as const)
    const t = tally(row, verdicts, (await replays(row.model)) - before, leftToValidation(row))
    measured.push({ config: config.name, tally: t })
    // Whatever the config, the edge answers 200 or holds the rule (strict: no invalid call passes): a 502 after
    // the replay, or, streamed (not replayed: `output.streamBuffer` is off), an in-band error.
    expect(Object.keys(t.failures).filter((s) => s !== "502" && s !== "in-band error")).toEqual([])
    expect(t.valid).toBe(t.calls)
    if (!config.asserted) return
    // Among the answers: the choice honoured, one call when asked.
    expect(t.honoured).toBe(t.answered)
    expect(t.oneCallHeld).toBe(t.oneCallAnswered)
    if (t.unconstrained.length > 0) return
    // The grammar holds every keyword: every request answered at the first attempt.
    expect({ answered: t.answered, honoured: t.honoured, oneCall: t.oneCallHeld, replays: t.replays }).toEqual({
      answered: config.n,
      honoured: config.n,
      oneCall: t.oneCallAsked,
      replays: 0
    })
  })
})

describe("llama.cpp's cost of the compiled grammar", () => {
  it.each(SCHEMA_FAMILIES.map((f) => [f.id, f] as const))("%s", async (_, family) => {
    const cost = await measureCost(upstream.replace(/\/$/, ""), family, COST_N)
    costs.push(cost)
    expect(cost.with.every((t) => Number.isFinite(t.tokensPerSecond) && t.predicted > 0)).toBe(true)
    expect(cost.without.every((t) => Number.isFinite(t.tokensPerSecond) && t.predicted > 0)).toBe(true)
  })
})
