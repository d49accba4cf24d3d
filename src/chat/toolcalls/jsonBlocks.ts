/**
 * Helpers shared by the formats whose blocks hold JSON: JSON values written one after another, call objects with
 * their own key names, Markdown fences, and blocks cut into calls by per-call markers.
 */
import { clip } from "../../common/clip.js"
import { type BlockResult, calls, indexOfCi, isWhitespace, malformed } from "./block.js"
import { argumentsText, isRecord, parseJson, REASON_PART_CHARS } from "./json.js"
import { JSON_OPENED, jsonClosed, jsonStep } from "./jsonScan.js"
import type { ParsedToolCall } from "./types.js"

/** A JSON text → its value, or the reason (naming the format) it is not JSON. */
export const jsonValue = (
  text: string,
  where: string
): { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly reason: string } => {
  const parsed = parseJson(text)
  return parsed.ok
    ? parsed
    : { ok: false, reason: `${where}: invalid JSON (${clip(parsed.error, REASON_PART_CHARS * 2)})` }
}

/**
 * The JSON objects and arrays of `text` written one after another, separated by whitespace or any char of
 * `separators` (Llama writes `{...}; {...}`), each as its text; else the reason it is not such a list.
 */
export const jsonSequence = (text: string, separators: string): ReadonlyArray<string> | string => {
  const out: Array<string> = []
  let i = 0
  while (i < text.length) {
    const c = text.charCodeAt(i)
    if (isWhitespace(c) || separators.includes(text[i] ?? "")) {
      i++
      continue
    }
    if (c !== 0x7b && c !== 0x5b) return `unexpected text ${JSON.stringify(clip(text.slice(i), REASON_PART_CHARS))}`
    const start = i
    let s = JSON_OPENED
    for (i++; i < text.length && !jsonClosed(s); i++) s = jsonStep(s, text.charCodeAt(i))
    if (!jsonClosed(s)) return "unterminated JSON"
    out.push(text.slice(start, i))
  }
  return out
}

/** A call object whose name and arguments are under the first of the given keys present; else why it is not one. */
export const keyedCall = (
  value: unknown,
  where: string,
  nameKeys: ReadonlyArray<string>,
  argumentKeys: ReadonlyArray<string>
): ParsedToolCall | string => {
  if (!isRecord(value)) return `${where}: not a JSON object`
  const nameKey = nameKeys.find((k) => k in value)
  const name = nameKey === undefined ? undefined : value[nameKey]
  if (typeof name !== "string" || name.trim() === "") return `${where}: no tool name`
  const argumentKey = argumentKeys.find((k) => k in value)
  const args = argumentsText(argumentKey === undefined ? undefined : value[argumentKey])
  if (args === undefined) return `${where}: arguments of "${clip(name, REASON_PART_CHARS)}" are not a JSON object`
  return { name: name.trim(), arguments: args }
}

/** Each value (an array counts as its elements) read as one call by `toCall`; the first failure makes it malformed. */
export const callsOf = (
  values: ReadonlyArray<unknown>,
  where: string,
  toCall: (value: unknown) => ParsedToolCall | string
): BlockResult => {
  const out: Array<ParsedToolCall> = []
  for (const value of values) {
    for (const item of Array.isArray(value) ? value : [value]) {
      const call = toCall(item)
      if (typeof call === "string") return malformed(call)
      out.push(call)
    }
  }
  return out.length === 0 ? malformed(`${where}: no calls`) : calls(out)
}

/** A block body that is one JSON value (a call object or an array of them, maybe in a Markdown fence). */
export const parseJsonBody = (
  body: string,
  where: string,
  toCall: (value: unknown) => ParsedToolCall | string
): BlockResult => {
  const text = stripFence(body.trim())
  if (text === "") return malformed(`${where}: empty`)
  const parsed = jsonValue(text, where)
  return parsed.ok ? callsOf([parsed.value], where, toCall) : malformed(parsed.reason)
}

/** The inside of a Markdown code fence (```json ... ```), or the text as it is. */
export const stripFence = (text: string): string => {
  if (!text.startsWith("```")) return text
  const firstLine = text.indexOf("\n")
  if (firstLine < 0) return text
  const inner = text.slice(firstLine + 1).trimEnd()
  return (inner.endsWith("```") ? inner.slice(0, -3) : inner).trim()
}

/**
 * The calls of a block written `BEGIN call END BEGIN call END ...` (text between calls is ignored). A call without
 * its END runs to the next BEGIN or to the end of the body. `begin` and `end` are given in lower case.
 */
export const callSegments = (body: string, begin: string, end: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  let pos = indexOfCi(body, begin, 0)
  // The last END found is kept while it lies ahead, so the body is scanned for each tag once.
  let close = -2
  while (pos >= 0) {
    const from = pos + begin.length
    const next = indexOfCi(body, begin, from)
    if (close !== -1 && close < from) close = indexOfCi(body, end, from)
    const closedHere = close >= 0 && (next < 0 || close < next)
    out.push(body.slice(from, closedHere ? close : next < 0 ? body.length : next))
    pos = next
  }
  return out
}
