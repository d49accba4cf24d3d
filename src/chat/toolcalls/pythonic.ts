/**
 * Pythonic call lists: `[get_weather(city="SF", days=3), search(query='a, b', tags=["x"], exact=True)]`. Arguments
 * are Python literals (strings in any quoting, numbers, True/False/None, lists, tuples, dicts) and the JSON spellings
 * models mix in (true/false/null). One recursive-descent pass over the text: no eval, no regular expressions.
 */
import { clip } from "../../common/clip.js"
import { type BlockResult, calls, isWhitespace, malformed } from "./block.js"
import { isRecord, REASON_PART_CHARS } from "./json.js"
import { toolProperties, typedValue } from "./typedArgs.js"
import type { ParsedToolCall, RequestTool } from "./types.js"

/** One call as written: its name and its keyword arguments as JSON values, in order. */
export interface PythonicCall {
  readonly name: string
  readonly args: ReadonlyArray<readonly [string, unknown]>
}

export type PythonicParse =
  | { readonly ok: true; readonly calls: ReadonlyArray<PythonicCall> }
  | { readonly ok: false; readonly error: string }

/** `list`: the calls must sit in `[...]`; `loose`: the brackets may be left out, calls then one per line or comma. */
export type CallListShape = "list" | "loose"

// Nesting deeper than this is refused rather than risking the stack.
const MAX_DEPTH = 256

interface Cursor {
  readonly text: string
  pos: number
  error: string | undefined
}

/** Records the first error; parsers return undefined after it (JSON values are never undefined). */
const fail = (c: Cursor, message: string): undefined => {
  c.error ??= message
  return undefined
}

const code = (c: Cursor): number => c.text.charCodeAt(c.pos)

const skipWs = (c: Cursor): void => {
  while (c.pos < c.text.length && isWhitespace(code(c))) c.pos++
}

const isDigit = (ch: number): boolean => ch >= 0x30 && ch <= 0x39
const isLetter = (ch: number): boolean => (ch >= 0x41 && ch <= 0x5a) || (ch >= 0x61 && ch <= 0x7a)
export const isIdentStart = (ch: number): boolean => isLetter(ch) || ch === 0x5f
export const isIdentChar = (ch: number): boolean => isIdentStart(ch) || isDigit(ch)
/** Tool names may also hold `-` and `.` (`functions.get-weather`). */
export const isNameChar = (ch: number): boolean => isIdentChar(ch) || ch === 0x2d || ch === 0x2e

const isOctal = (ch: number): boolean => ch >= 0x30 && ch <= 0x37
const isHex = (ch: number): boolean => isDigit(ch) || (ch >= 0x41 && ch <= 0x46) || (ch >= 0x61 && ch <= 0x66)
const isQuote = (ch: number): boolean => ch === 0x22 || ch === 0x27

const word = (c: Cursor, isChar: (ch: number) => boolean): string => {
  const start = c.pos
  while (c.pos < c.text.length && isChar(code(c))) c.pos++
  return c.text.slice(start, c.pos)
}

const shown = (text: string): string => clip(text, REASON_PART_CHARS)

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  n: "\n",
  t: "\t",
  r: "\r",
  "\\": "\\",
  "'": "'",
  "\"": "\"",
  a: "\x07",
  b: "\b",
  f: "\f",
  v: "\v",
  "\n": ""
}

/** The escape at `c.pos` (just past the backslash) as text; the cursor moves past it. */
const escapeText = (c: Cursor): string => {
  const ch = c.text[c.pos] ?? ""
  const simple = SIMPLE_ESCAPES[ch]
  if (simple !== undefined) {
    c.pos++
    return simple
  }
  const hexLength = ch === "x" ? 2 : ch === "u" ? 4 : ch === "U" ? 8 : 0
  if (hexLength > 0) {
    const hex = c.text.slice(c.pos + 1, c.pos + 1 + hexLength)
    let digits = 0
    while (digits < hex.length && isHex(hex.charCodeAt(digits))) digits++
    const value = digits === hexLength ? Number.parseInt(hex, 16) : -1
    if (value >= 0 && value <= 0x10ffff) {
      c.pos += 1 + hexLength
      return String.fromCodePoint(value)
    }
  }
  if (isOctal(c.text.charCodeAt(c.pos))) {
    let end = c.pos
    while (end < c.pos + 3 && isOctal(c.text.charCodeAt(end))) end++
    const value = Number.parseInt(c.text.slice(c.pos, end), 8)
    c.pos = end
    return String.fromCodePoint(value)
  }
  // Python keeps the backslash of an escape it does not know.
  return "\\"
}

/** A string literal at `c.pos` (past any `r`/`u` prefix): `'...'`, `"..."`, `'''...'''` or `"""..."""`. */
const parseString = (c: Cursor, raw: boolean): string | undefined => {
  const quote = code(c)
  const triple = c.text.charCodeAt(c.pos + 1) === quote && c.text.charCodeAt(c.pos + 2) === quote
  c.pos += triple ? 3 : 1
  let out = ""
  let run = c.pos
  while (c.pos < c.text.length) {
    const ch = code(c)
    if (ch === 0x5c) {
      // In a raw string the backslash stays, but still keeps the next char from ending the string.
      if (raw) {
        c.pos += 2
        continue
      }
      out += c.text.slice(run, c.pos)
      c.pos++
      out += escapeText(c)
      run = c.pos
      continue
    }
    if (ch === quote && (!triple || (c.text.charCodeAt(c.pos + 1) === quote && c.text.charCodeAt(c.pos + 2) === quote))) {
      out += c.text.slice(run, c.pos)
      c.pos += triple ? 3 : 1
      return out
    }
    c.pos++
  }
  return fail(c, "unterminated string")
}

/** Decimal, hex, octal or binary; `_` separators; a sign. Complex and non-finite numbers are refused. */
const parseNumber = (c: Cursor): number | undefined => {
  const start = c.pos
  const sign = code(c) === 0x2d ? -1 : 1
  if (code(c) === 0x2d || code(c) === 0x2b) c.pos++
  const bodyStart = c.pos
  const radix = code(c) === 0x30 && "xXoObB".includes(c.text[c.pos + 1] ?? "_")
  while (c.pos < c.text.length) {
    const ch = code(c)
    const prev = c.text.charCodeAt(c.pos - 1)
    const exponentSign = (ch === 0x2b || ch === 0x2d) && !radix && (prev === 0x65 || prev === 0x45)
    if (!(isIdentChar(ch) || ch === 0x2e || exponentSign)) break
    c.pos++
  }
  const body = c.text.slice(bodyStart, c.pos).replaceAll("_", "")
  const value = body === "" || body === "." ? Number.NaN : Number(body)
  if (!Number.isFinite(value)) return fail(c, `not a number: ${shown(c.text.slice(start, c.pos))}`)
  return sign * value
}

const KEYWORDS: ReadonlyMap<string, unknown> = new Map<string, unknown>([
  ["True", true],
  ["False", false],
  ["None", null],
  ["true", true],
  ["false", false],
  ["null", null]
])

/** A list (`]`) or tuple (`)`): items up to `close`, a trailing comma allowed. `(x)` is just `x`. */
const parseSequence = (c: Cursor, close: number, depth: number): unknown => {
  c.pos++
  const items: Array<unknown> = []
  let comma = false
  for (;;) {
    skipWs(c)
    if (code(c) === close) break
    const item = parseValue(c, depth + 1)
    if (item === undefined) return undefined
    items.push(item)
    skipWs(c)
    if (code(c) !== 0x2c) break
    comma = true
    c.pos++
  }
  if (code(c) !== close) return fail(c, `expected ${String.fromCharCode(close)}`)
  c.pos++
  return close === 0x29 && items.length === 1 && !comma ? items[0] : items
}

const keyText = (key: unknown): string | undefined =>
  typeof key === "string" ? key : key === null || typeof key !== "object" ? JSON.stringify(key) : undefined

const parseDict = (c: Cursor, depth: number): unknown => {
  c.pos++
  const entries: Array<readonly [string, unknown]> = []
  for (;;) {
    skipWs(c)
    if (code(c) === 0x7d) break
    const key = keyText(parseValue(c, depth + 1))
    if (key === undefined) return fail(c, "a dict key that is not a string, number or constant")
    skipWs(c)
    if (code(c) !== 0x3a) return fail(c, "expected : in a dict")
    c.pos++
    const value = parseValue(c, depth + 1)
    if (value === undefined) return undefined
    entries.push([key, value])
    skipWs(c)
    if (code(c) !== 0x2c) break
    c.pos++
  }
  if (code(c) !== 0x7d) return fail(c, "expected }")
  c.pos++
  // fromEntries defines own properties, so a `__proto__` key stays a key.
  return Object.fromEntries(entries)
}

/** One Python literal as a JSON value, or undefined (with `c.error` set). */
const parseValue = (c: Cursor, depth: number): unknown => {
  if (depth > MAX_DEPTH) return fail(c, "nested too deeply")
  skipWs(c)
  const ch = code(c)
  if (isQuote(ch)) return parseString(c, false)
  if (ch === 0x5b) return parseSequence(c, 0x5d, depth)
  if (ch === 0x28) return parseSequence(c, 0x29, depth)
  if (ch === 0x7b) return parseDict(c, depth)
  if (isDigit(ch) || ch === 0x2d || ch === 0x2b || ch === 0x2e) return parseNumber(c)
  if (isIdentStart(ch)) {
    const name = word(c, isIdentChar)
    const lower = name.toLowerCase()
    if ((lower === "r" || lower === "u") && isQuote(code(c))) return parseString(c, lower === "r")
    return KEYWORDS.has(name) ? KEYWORDS.get(name) : fail(c, `not a literal: ${shown(name)}`)
  }
  return fail(c, c.pos >= c.text.length ? "unexpected end" : `unexpected ${shown(c.text.slice(c.pos, c.pos + 1))}`)
}

/** `name(key=value, ...)` at `c.pos`. */
const parseCall = (c: Cursor): PythonicCall | undefined => {
  if (!isIdentStart(code(c))) return fail(c, "expected a function name")
  const name = word(c, isNameChar)
  skipWs(c)
  if (code(c) !== 0x28) return fail(c, `expected ( after ${shown(name)}`)
  c.pos++
  const args: Array<readonly [string, unknown]> = []
  for (;;) {
    skipWs(c)
    if (code(c) === 0x29) break
    const key = word(c, isIdentChar)
    skipWs(c)
    if (key === "" || !isIdentStart(key.charCodeAt(0)) || code(c) !== 0x3d || c.text.charCodeAt(c.pos + 1) === 0x3d) {
      return fail(c, `a positional argument in ${shown(name)}(...): arguments must be keyword=value`)
    }
    c.pos++
    const value = parseValue(c, 0)
    if (value === undefined) return undefined
    args.push([key, value])
    skipWs(c)
    if (code(c) !== 0x2c) break
    c.pos++
  }
  if (code(c) !== 0x29) return fail(c, `expected , or ) in ${shown(name)}(...)`)
  c.pos++
  return { name, args }
}

/** The calls of a pythonic call list (the whole text, whitespace around it allowed). */
export const parsePythonicCalls = (text: string, shape: CallListShape): PythonicParse => {
  const c: Cursor = { text, pos: 0, error: undefined }
  skipWs(c)
  const bracketed = code(c) === 0x5b
  if (!bracketed && shape === "list") return { ok: false, error: "expected [" }
  if (bracketed) c.pos++
  const out: Array<PythonicCall> = []
  for (;;) {
    skipWs(c)
    if (bracketed ? code(c) === 0x5d : c.pos >= text.length) break
    const call = parseCall(c)
    if (call === undefined) break
    out.push(call)
    skipWs(c)
    // Unbracketed calls may follow one another on their own lines, without commas.
    if (code(c) === 0x2c) c.pos++
    else if (bracketed && code(c) !== 0x5d) fail(c, "expected , or ] after a call")
    if (c.error !== undefined) break
  }
  if (c.error === undefined && bracketed) c.pos++
  skipWs(c)
  if (c.error === undefined && c.pos < text.length) fail(c, "text after the call list")
  if (c.error === undefined && out.length === 0) fail(c, "no calls")
  return c.error === undefined ? { ok: true, calls: out } : { ok: false, error: c.error }
}

// A schema that says what its value is (type, enum or const) types a string written for it; others leave it be.
const saysType = (schema: unknown): boolean =>
  isRecord(schema) && ("type" in schema || "enum" in schema || "const" in schema)

/**
 * A call with its arguments as JSON text: a string written for a property whose schema wants another type is read
 * as that type (`days="3"` for an integer is 3); every other value stays as written.
 */
export const typedCall = (call: PythonicCall, tools: ReadonlyArray<RequestTool>, name = call.name): ParsedToolCall => {
  const props = toolProperties(tools, call.name)
  const args = call.args.map(([key, value]): readonly [string, unknown] => {
    const schema = props[key]
    return [key, typeof value === "string" && saysType(schema) ? typedValue(value, schema) : value]
  })
  return { name, arguments: JSON.stringify(Object.fromEntries(args)) }
}

/** A block body that is a call list, as the block's calls (or why it is malformed, naming the format). */
export const pythonicBlock = (
  body: string,
  tools: ReadonlyArray<RequestTool>,
  where: string,
  shape: CallListShape
): BlockResult => {
  const parsed = parsePythonicCalls(body, shape)
  if (!parsed.ok) return malformed(`${where}: ${parsed.error}`)
  return calls(parsed.calls.map((call) => typedCall(call, tools)))
}
