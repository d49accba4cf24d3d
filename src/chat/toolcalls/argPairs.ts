/**
 * One call written as its name then key/value element pairs: GLM-4.5 to GLM-5 and Laguna
 * (`NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>…`, with or without newlines between) and Tencent Hy3 (the
 * same tags suffixed `:opensource`, the name ended by `<tool_sep:opensource>`). The templates write a string as it is
 * and anything else as JSON, unescaped, so values are kept as written and typed by the tool's JSON Schema.
 */
import { clip } from "../../common/clip.js"
import { type BlockResult, calls, indexOfCi, isWhitespace, malformed } from "./block.js"
import { finder } from "./invokes.js"
import { REASON_PART_CHARS } from "./json.js"
import { toolProperties, typedValue } from "./typedArgs.js"
import type { RequestTool } from "./types.js"

export interface PairSyntax {
  readonly where: string
  /** Tags in lower case (ASCII-case-insensitive match). */
  readonly key: string
  readonly keyEnd: string
  readonly value: string
  readonly valueEnd: string
  /** A tag that ends the name, when the family writes one. */
  readonly nameEnd?: string
}

// A name runs to whitespace or markup: JSON, quotes and tags are never part of one.
const isNameCode = (c: number): boolean =>
  !isWhitespace(c) && c !== 0x3c && c !== 0x3e && c !== 0x7b && c !== 0x7d && c !== 0x5b && c !== 0x5d &&
  c !== 0x22 && c !== 0x27 && c !== 0x60

const nameLength = (text: string, from: number): number => {
  let i = from
  while (i < text.length && isNameCode(text.charCodeAt(i))) i++
  return i - from
}

/** The body is a name, then either nothing or the first key tag (whitespace between): exactly this shape. */
export const claimsPairs = (syntax: PairSyntax, body: string): boolean => {
  let i = 0
  while (i < body.length && isWhitespace(body.charCodeAt(i))) i++
  const n = nameLength(body, i)
  if (n === 0) return false
  const name = body.slice(i, i + n)
  i += n
  if (syntax.nameEnd !== undefined && indexOfCi(body.slice(i, i + syntax.nameEnd.length), syntax.nameEnd, 0) === 0) {
    i += syntax.nameEnd.length
  }
  while (i < body.length && isWhitespace(body.charCodeAt(i))) i++
  if (i < body.length) return indexOfCi(body.slice(i, i + syntax.key.length), syntax.key, 0) === 0
  // A bare name: not a JSON literal, which is a JSON-bodied format's malformed block.
  return /^[A-Za-z_]/.test(name) && !/^(true|false|null)$/i.test(name)
}

const callName = (syntax: PairSyntax, head: string): string | undefined => {
  const at = syntax.nameEnd === undefined ? -1 : indexOfCi(head, syntax.nameEnd, 0)
  const name = (at < 0 ? head : head.slice(0, at)).trim()
  return name !== "" && nameLength(name, 0) === name.length ? name : undefined
}

/** The one call of a body. `closed`: its close tag was seen (else it must not end inside an element). */
export const parsePairCall = (
  syntax: PairSyntax,
  body: string,
  closed: boolean,
  tools: ReadonlyArray<RequestTool>
): BlockResult => {
  const nextKey = finder(body, syntax.key)
  const nextKeyEnd = finder(body, syntax.keyEnd)
  const nextValue = finder(body, syntax.value)
  const nextValueEnd = finder(body, syntax.valueEnd)
  const first = nextKey(0)
  const name = callName(syntax, body.slice(0, first < 0 ? body.length : first))
  if (name === undefined) return malformed(`${syntax.where}: no tool name`)
  const shown = clip(name, REASON_PART_CHARS)
  // A bare name cut off by the end of the stream may be cut inside the name.
  if (first < 0 && !closed) return malformed(`${syntax.where}${shown}: no close tag`)
  const props = toolProperties(tools, name)
  const args: Record<string, unknown> = {}
  let at = first
  while (at >= 0) {
    const keyStart = at + syntax.key.length
    const following = nextKey(keyStart)
    const open = nextValue(keyStart)
    if (open < 0 || (following >= 0 && open > following)) {
      return malformed(`${syntax.where}${shown}: a key has no value`)
    }
    const keyClose = nextKeyEnd(keyStart)
    const key = body.slice(keyStart, keyClose >= 0 && keyClose < open ? keyClose : open).trim()
    if (key === "") return malformed(`${syntax.where}${shown}: an argument has no name`)
    const valueStart = open + syntax.value.length
    const next = nextKey(valueStart)
    const close = nextValueEnd(valueStart)
    // A missing close tag ends the value at the next key, or at the end of a closed block.
    const closedHere = close >= 0 && (next < 0 || close < next)
    if (!closedHere && next < 0 && !closed) return malformed(`${syntax.where}${shown}: unterminated value`)
    args[key] = typedValue(body.slice(valueStart, closedHere ? close : next >= 0 ? next : body.length), props[key])
    at = next
  }
  return calls([{ name, arguments: JSON.stringify(args) }])
}
