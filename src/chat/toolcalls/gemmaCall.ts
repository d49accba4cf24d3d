/**
 * The call DSL of FunctionGemma and Gemma 4: `call:NAME{key:VALUE,...}`, where a string sits between two string
 * markers (`<escape>` for FunctionGemma, `<|"|>` for Gemma 4) and is taken as is, and numbers, booleans and null are
 * written bare. Objects nest as `{key:VALUE}` (keys bare or between string markers), arrays as `[VALUE,...]`.
 */
import { clip } from "../../common/clip.js"
import { type BlockResult, calls, isWhitespace, lowerCode, malformed, type TagFormat, tagFormat } from "./block.js"
import { isRecord, REASON_PART_CHARS } from "./json.js"
import { toolProperties, typedValue } from "./typedArgs.js"
import type { ParsedToolCall, RequestTool } from "./types.js"

const CALL = "call:"
const MAX_DEPTH = 256

interface Cursor {
  readonly text: string
  /** The string marker. */
  readonly quote: string
  pos: number
  error: string | undefined
}

/** A value as written: a string between markers, a bare scalar (its text), or a nested object / array. */
type Written =
  | { readonly _tag: "Quoted"; readonly text: string }
  | { readonly _tag: "Bare"; readonly text: string }
  | { readonly _tag: "Nested"; readonly value: unknown }

const fail = (c: Cursor, message: string): undefined => {
  c.error ??= message
  return undefined
}

const skipWs = (c: Cursor): void => {
  while (c.pos < c.text.length && isWhitespace(c.text.charCodeAt(c.pos))) c.pos++
}

const startsAt = (c: Cursor, token: string): boolean => c.text.startsWith(token, c.pos)

const quoted = (c: Cursor): string | undefined => {
  const from = c.pos + c.quote.length
  const end = c.text.indexOf(c.quote, from)
  if (end < 0) return fail(c, `unterminated ${c.quote} string`)
  c.pos = end + c.quote.length
  return c.text.slice(from, end)
}

/** Text up to the next `,`, `}` or `]` (or `:` for a key), trimmed. */
const bare = (c: Cursor, stopAtColon: boolean): string => {
  const from = c.pos
  for (; c.pos < c.text.length; c.pos++) {
    const ch = c.text.charCodeAt(c.pos)
    if (ch === 0x2c || ch === 0x7d || ch === 0x5d || (stopAtColon && ch === 0x3a)) break
    if (startsAt(c, c.quote)) break
  }
  return c.text.slice(from, c.pos).trim()
}

// Python's None, as a Jinja template renders it, is null.
const bareValue = (text: string, schema: unknown): unknown => typedValue(text === "None" ? "null" : text, schema)

/** A written value as JSON, with no schema to go by (inside objects and arrays). */
const plain = (w: Written): unknown =>
  w._tag === "Quoted" ? w.text : w._tag === "Bare" ? bareValue(w.text, undefined) : w.value

const parseArray = (c: Cursor, depth: number): unknown => {
  c.pos++
  const items: Array<unknown> = []
  for (;;) {
    skipWs(c)
    if (c.text.charCodeAt(c.pos) === 0x5d) break
    const item = parseWritten(c, depth + 1)
    if (item === undefined) return undefined
    items.push(plain(item))
    skipWs(c)
    if (c.text.charCodeAt(c.pos) !== 0x2c) break
    c.pos++
  }
  if (c.text.charCodeAt(c.pos) !== 0x5d) return fail(c, "expected ]")
  c.pos++
  return items
}

/** `{key:VALUE,...}` at `c.pos`, its entries as written. */
const parseEntries = (c: Cursor, depth: number): Array<readonly [string, Written]> | undefined => {
  c.pos++
  const entries: Array<readonly [string, Written]> = []
  for (;;) {
    skipWs(c)
    if (c.text.charCodeAt(c.pos) === 0x7d) break
    const key = startsAt(c, c.quote) ? quoted(c) : bare(c, true)
    if (key === undefined) return undefined
    skipWs(c)
    if (key === "" || c.text.charCodeAt(c.pos) !== 0x3a) return fail(c, "expected key:value")
    c.pos++
    const value = parseWritten(c, depth + 1)
    if (value === undefined) return undefined
    entries.push([key, value])
    skipWs(c)
    if (c.text.charCodeAt(c.pos) !== 0x2c) break
    c.pos++
  }
  if (c.text.charCodeAt(c.pos) !== 0x7d) return fail(c, "expected , or }")
  c.pos++
  return entries
}

const parseWritten = (c: Cursor, depth: number): Written | undefined => {
  if (depth > MAX_DEPTH) return fail(c, "nested too deeply")
  skipWs(c)
  if (startsAt(c, c.quote)) {
    const text = quoted(c)
    return text === undefined ? undefined : { _tag: "Quoted", text }
  }
  const ch = c.text.charCodeAt(c.pos)
  if (ch === 0x7b) {
    const entries = parseEntries(c, depth)
    if (entries === undefined) return undefined
    // fromEntries defines own properties, so a `__proto__` key stays a key.
    return { _tag: "Nested", value: Object.fromEntries(entries.map(([k, w]) => [k, plain(w)])) }
  }
  if (ch === 0x5b) {
    const value = parseArray(c, depth)
    return value === undefined ? undefined : { _tag: "Nested", value }
  }
  const text = bare(c, false)
  return text === "" ? fail(c, "a value is missing") : { _tag: "Bare", text }
}

const saysType = (schema: unknown): boolean =>
  isRecord(schema) && ("type" in schema || "enum" in schema || "const" in schema)

/** An argument by its property's schema: bare text is typed; a string is retyped only for a non-string property. */
const typedArgument = (w: Written, schema: unknown): unknown => {
  if (w._tag === "Bare") return bareValue(w.text, schema)
  if (w._tag === "Quoted") return saysType(schema) ? typedValue(w.text, schema) : w.text
  return w.value
}

const startsCi = (text: string, at: number, lower: string): boolean => {
  for (let k = 0; k < lower.length; k++) if (lowerCode(text.charCodeAt(at + k)) !== lower.charCodeAt(k)) return false
  return true
}

/** Every `call:NAME{...}` of a block body, in order (the templates write one per block). */
export const parseGemmaCalls = (
  body: string,
  quote: string,
  tools: ReadonlyArray<RequestTool>
): ReadonlyArray<ParsedToolCall> | string => {
  const c: Cursor = { text: body, quote, pos: 0, error: undefined }
  const out: Array<ParsedToolCall> = []
  for (;;) {
    skipWs(c)
    if (c.pos >= body.length) break
    if (!startsCi(body, c.pos, CALL)) return "expected call:NAME{...}"
    const brace = body.indexOf("{", c.pos)
    const name = brace < 0 ? "" : body.slice(c.pos + CALL.length, brace).trim()
    if (name === "") return "no tool name"
    c.pos = brace
    const entries = parseEntries(c, 0)
    if (entries === undefined) return `${clip(name, REASON_PART_CHARS)}: ${c.error ?? "unreadable arguments"}`
    const props = toolProperties(tools, name)
    const args = entries.map(([key, w]) => [key, typedArgument(w, props[key])] as const)
    out.push({ name, arguments: JSON.stringify(Object.fromEntries(args)) })
  }
  return out.length === 0 ? "no calls" : out
}

const gemmaBlock = (body: string, quote: string, tools: ReadonlyArray<RequestTool>, where: string): BlockResult => {
  const parsed = parseGemmaCalls(body, quote, tools)
  return typeof parsed === "string" ? malformed(`${where}: ${parsed}`) : calls(parsed)
}

/** FunctionGemma (Google's FunctionGemma formatting docs): strings between `<escape>` tokens. */
export const functionGemma: TagFormat = tagFormat({
  format: "function_gemma",
  open: "<start_function_call>",
  close: "<end_function_call>",
  parse: (body, _closed, tools) => gemmaBlock(body, "<escape>", tools, "<start_function_call>")
})

/** Gemma 4 (its chat template): `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>`. */
export const gemma4: TagFormat = tagFormat({
  format: "gemma4",
  open: "<|tool_call>",
  close: "<tool_call|>",
  parse: (body, _closed, tools) => gemmaBlock(body, "<|\"|>", tools, "<|tool_call>")
})
