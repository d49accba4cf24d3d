/**
 * The measurement matrix of issue 21 as plain functions: one request of a row (API × schema family × tool_choice ×
 * request index) as each API's body, an answer judged against the row's rules, the row's tally, and the tables.
 */
import { Ajv2020 } from "ajv/dist/2020.js"
import addFormats from "ajv-formats"
import type { Api, Outcome } from "./apis.js"
import { type MatrixTool, SCHEMA_FAMILIES, type SchemaFamily, toolsOf } from "./matrixFamilies.js"

export type Choice = "auto" | "required" | "named"
export const CHOICES: ReadonlyArray<Choice> = ["auto", "required", "named"]

export interface Row {
  /** The edge model (a config) the row ran on. */
  readonly model: string
  readonly api: Api
  readonly family: SchemaFamily
  readonly choice: Choice
}

/** Request `i` of a row: streamed every other request, `parallel_tool_calls: false` two requests in four. */
export interface Shot {
  readonly index: number
  readonly stream: boolean
  readonly oneCall: boolean
  readonly seed: number
}

export const shot = (index: number): Shot => ({ index, stream: index % 2 === 1, oneCall: index % 4 >= 2, seed: index + 1 })

export const MAX_TOKENS = 256

type Json = Record<string, unknown>

const promptOf = (family: SchemaFamily): string => `${family.tool.description}, please.`

const chatChoice = (row: Row): unknown =>
  row.choice === "named" ? { type: "function", function: { name: row.family.tool.name } } : row.choice

const responsesChoice = (row: Row): unknown =>
  row.choice === "named" ? { type: "function", name: row.family.tool.name } : row.choice

const messagesChoice = (row: Row, s: Shot): Json => ({
  type: row.choice === "named" ? "tool" : row.choice === "required" ? "any" : "auto",
  ...(row.choice === "named" ? { name: row.family.tool.name } : {}),
  ...(s.oneCall ? { disable_parallel_tool_use: true } : {})
})

/**
 * The body of request `s` of `row` on its API. The tools are `strict: true` where the API has the field (Chat
 * Completions, Responses; the Messages API has none). Only Chat Completions has a `seed`: the other two rows sample
 * with the server's random seed. `callBias`: a Chat Completions `logit_bias` that its `auto` rows send (the random
 * model never opens a call by itself; with it, `auto` answers are text, calls, or both).
 */
export const bodyOf = (row: Row, s: Shot, callBias?: Readonly<Record<string, number>>): Json => {
  const tools = toolsOf(row.family)
  const user = promptOf(row.family)
  const oneCall = s.oneCall ? { parallel_tool_calls: false } : {}
  switch (row.api) {
    case "chat":
      return {
        model: row.model,
        stream: s.stream,
        messages: [{ role: "user", content: user }],
        tools: tools.map((t) => ({
          type: "function",
          function: { name: t.name, description: t.description, parameters: t.parameters, strict: true }
        })),
        tool_choice: chatChoice(row),
        ...oneCall,
        ...(row.choice === "auto" && callBias !== undefined ? { logit_bias: callBias } : {}),
        max_tokens: MAX_TOKENS,
        temperature: 1,
        seed: s.seed
      }
    case "responses":
      return {
        model: row.model,
        stream: s.stream,
        input: user,
        tools: tools.map((t) => ({ type: "function", name: t.name, description: t.description, parameters: t.parameters, strict: true })),
        tool_choice: responsesChoice(row),
        ...oneCall,
        max_output_tokens: MAX_TOKENS,
        temperature: 1
      }
    case "messages":
      return {
        model: row.model,
        stream: s.stream,
        messages: [{ role: "user", content: user }],
        tools: tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters })),
        tool_choice: messagesChoice(row, s),
        max_tokens: MAX_TOKENS,
        temperature: 1
      }
  }
}

/** One answer: a 200 (its outcome), or the edge's status other than 200. */
export type Answer =
  | { readonly _tag: "Answered"; readonly outcome: Outcome }
  | { readonly _tag: "Refused"; readonly status: number; readonly body: string }

const ajv = new Ajv2020({ strict: false, allErrors: false })
addFormats.default(ajv)
const validators = new Map(
  SCHEMA_FAMILIES.flatMap((f) => toolsOf(f)).map((t: MatrixTool) => [t.name, ajv.compile(t.parameters)] as const)
)

/** A call is valid when it names a tool the request offered and its arguments are valid against that schema. */
export const validCall = (offered: ReadonlyArray<MatrixTool>, call: { readonly name: string; readonly arguments: unknown }): boolean =>
  offered.some((t) => t.name === call.name) && (validators.get(call.name)?.(call.arguments) ?? false)

export interface Verdict {
  /** A 200 without an in-band error. */
  readonly answered: boolean
  readonly calls: number
  readonly valid: number
  /** `required`: at least one call; named: at least one, all of that tool; `auto`: any answer. */
  readonly honoured: boolean
  /** Asked `parallel_tool_calls: false` and answered at most one call (`auto`) or exactly one (the others). */
  readonly oneCallHeld: boolean
  readonly status: string
  /** The answer's finish (Chat: finish_reason, Responses: status, Messages: stop_reason), or the refusal's body. */
  readonly detail: string
}

export const judge = (row: Row, s: Shot, answer: Answer): Verdict => {
  if (answer._tag === "Refused") {
    return {
      answered: false,
      calls: 0,
      valid: 0,
      honoured: false,
      oneCallHeld: false,
      status: String(answer.status),
      detail: answer.body.slice(0, 300)
    }
  }
  const out = answer.outcome
  const offered = toolsOf(row.family)
  const calls = out.calls
  const valid = calls.filter((c) => validCall(offered, c)).length
  if (out.error !== undefined) {
    return {
      answered: false,
      calls: calls.length,
      valid,
      honoured: false,
      oneCallHeld: false,
      status: "in-band error",
      detail: out.error.slice(0, 300)
    }
  }
  const honoured = row.choice === "auto"
    ? true
    : row.choice === "required"
    ? calls.length >= 1
    : calls.length >= 1 && calls.every((c) => c.name === row.family.tool.name)
  return {
    answered: true,
    calls: calls.length,
    valid,
    honoured,
    oneCallHeld: s.oneCall && (row.choice === "auto" ? calls.length <= 1 : calls.length === 1),
    status: "200",
    detail: out.finish ?? "none"
  }
}

export interface Tally {
  readonly row: Row
  readonly requests: number
  readonly answered: number
  readonly withCalls: number
  readonly calls: number
  readonly valid: number
  readonly honoured: number
  readonly oneCallAsked: number
  /** Asked for one call and answered (the denominator of `oneCallHeld`). */
  readonly oneCallAnswered: number
  readonly oneCallHeld: number
  /** The edge's `iop_tool_validation_total{result="retry"}` for the row's model, across the row. */
  readonly replays: number
  /** Statuses other than 200 (and in-band errors), by count. */
  readonly failures: Readonly<Record<string, number>>
  /** The answers' finishes, by count. */
  readonly finishes: Readonly<Record<string, number>>
  /** The first refusal's (or in-band error's) body, clipped. */
  readonly sample?: string
  /** What the compiled grammar leaves to validation (JSON pointers into the request), empty when all compiles. */
  readonly unconstrained: ReadonlyArray<string>
}

export const tally = (
  row: Row,
  shots: ReadonlyArray<readonly [Shot, Verdict]>,
  replays: number,
  unconstrained: ReadonlyArray<string>
): Tally => {
  const failures: Record<string, number> = {}
  const finishes: Record<string, number> = {}
  for (const [, v] of shots) {
    if (!v.answered) failures[v.status] = (failures[v.status] ?? 0) + 1
    else finishes[v.detail] = (finishes[v.detail] ?? 0) + 1
  }
  const sample = shots.find(([, v]) => !v.answered)?.[1].detail
  const count = (p: (s: Shot, v: Verdict) => boolean) => shots.filter(([s, v]) => p(s, v)).length
  const sum = (f: (v: Verdict) => number) => shots.reduce((n, [, v]) => n + f(v), 0)
  return {
    row,
    requests: shots.length,
    answered: count((_, v) => v.answered),
    withCalls: count((_, v) => v.calls > 0),
    calls: sum((v) => v.calls),
    valid: sum((v) => v.valid),
    honoured: count((_, v) => v.honoured),
    oneCallAsked: count((s) => s.oneCall),
    oneCallAnswered: count((s, v) => s.oneCall && v.answered),
    oneCallHeld: count((_, v) => v.oneCallHeld),
    replays,
    failures,
    finishes,
    ...(sample !== undefined ? { sample } : {}),
    unconstrained
  }
}

// --- tables

const failuresText = (f: Readonly<Record<string, number>>): string =>
  Object.keys(f).length === 0 ? "0" : Object.entries(f).map(([k, n]) => `${n}× ${k}`).join(", ")

/** The first refusal of each row that had one: what the edge said. */
export const samples = (rows: ReadonlyArray<Measured>): ReadonlyArray<string> =>
  rows.flatMap((r) =>
    r.tally.sample === undefined
      ? []
      : [`- ${r.config} ${r.tally.row.api} ${r.tally.row.family.id} ${r.tally.row.choice}: \`${r.tally.sample.replace(/\s+/g, " ")}\``]
  )

const HEADER = [
  "| config | API | family | tool_choice | 200 | with calls | schema-valid calls | choice honoured | parallel false: one call | replays | non-200 | finishes (200) | left to validation |",
  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
]

const rowLine = (t: Tally, config: string, family: string, gaps: string): string =>
  `| ${config} | ${t.row.api} | ${family} | ${t.row.choice} | ${t.answered}/${t.requests} | ${t.withCalls} | ` +
  `${t.valid}/${t.calls} | ${t.honoured}/${t.requests} | ${t.oneCallHeld}/${t.oneCallAsked} | ${t.replays} | ` +
  `${failuresText(t.failures)} | ${failuresText(t.finishes)} | ${gaps} |`

export interface Measured {
  readonly config: string
  readonly tally: Tally
}

export const detailTable = (rows: ReadonlyArray<Measured>): string =>
  [
    ...HEADER,
    ...rows.map((r) =>
      rowLine(r.tally, r.config, r.tally.row.family.id, r.tally.unconstrained.length === 0 ? "—" : `${r.tally.unconstrained.length} keywords`)
    )
  ].join("\n")

const merge = (a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>): Record<string, number> => {
  const out: Record<string, number> = { ...a }
  for (const [k, n] of Object.entries(b)) out[k] = (out[k] ?? 0) + n
  return out
}

const add = (a: Tally, b: Tally): Tally => {
  return {
    row: a.row,
    requests: a.requests + b.requests,
    answered: a.answered + b.answered,
    withCalls: a.withCalls + b.withCalls,
    calls: a.calls + b.calls,
    valid: a.valid + b.valid,
    honoured: a.honoured + b.honoured,
    oneCallAsked: a.oneCallAsked + b.oneCallAsked,
    oneCallAnswered: a.oneCallAnswered + b.oneCallAnswered,
    oneCallHeld: a.oneCallHeld + b.oneCallHeld,
    replays: a.replays + b.replays,
    failures: merge(a.failures, b.failures),
    finishes: merge(a.finishes, b.finishes),
    unconstrained: [...a.unconstrained, ...b.unconstrained]
  }
}

/** The rows summed over the schema families: one line per config × API × tool_choice. */
export const summaryTable = (rows: ReadonlyArray<Measured>): string => {
  const groups = new Map<string, { config: string; tally: Tally; gaps: Set<string> }>()
  for (const r of rows) {
    const key = `${r.config}|${r.tally.row.api}|${r.tally.row.choice}`
    const known = groups.get(key)
    const gaps = new Set([...(known?.gaps ?? []), ...(r.tally.unconstrained.length > 0 ? [r.tally.row.family.id] : [])])
    groups.set(key, { config: r.config, tally: known === undefined ? r.tally : add(known.tally, r.tally), gaps })
  }
  const lines = [...groups.values()].map((g) =>
    rowLine(g.tally, g.config, "all five", g.gaps.size === 0 ? "—" : [...g.gaps].join(", "))
  )
  return [...HEADER, ...lines].join("\n")
}

export const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length === 0 ? NaN : s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2
}
