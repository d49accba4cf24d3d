/**
 * The body of a block that holds calls as tagged elements with one tagged element per argument, the shape shared by
 * MiniMax-M2 (`<invoke name=…><parameter name=…>`), DeepSeek DSML, Seed-OSS (`<function=…><parameter=…>`) and
 * Kimi K3 (`<|open|>call tool=…<|sep|>`). Each family gives its tag prefixes and how a header names things; the
 * walk, the tolerance of missing close tags and the typing of values are shared here.
 */
import { clip } from "../../common/clip.js"
import { type BlockResult, calls, indexOfCi, malformed } from "./block.js"
import { isRecord, parseJson, REASON_PART_CHARS } from "./json.js"
import { toolProperties } from "./typedArgs.js"
import type { ParsedToolCall, RequestTool } from "./types.js"

export interface InvokeSyntax {
  /** Names the format in malformed reasons. */
  readonly where: string
  /** Tag prefixes, in lower case (ASCII-case-insensitive match); a header runs from the prefix to `headerEnd`. */
  readonly invoke: string
  readonly invokeEnd: string
  readonly param: string
  readonly paramEnd: string
  readonly headerEnd: string
  /** The call's name from its header (the text between the prefix and `headerEnd`); undefined when it has none. */
  readonly callName: (header: string) => string | undefined
  readonly paramName: (header: string) => string | undefined
  /** The argument's value from its raw text, its header (which may declare a type) and its schema property. */
  readonly value: (raw: string, header: string, schema: unknown) => unknown
  /** Kimi K3 may give the whole arguments as one JSON object in its own element instead of one per argument. */
  readonly jsonArgs?: { readonly open: string; readonly close: string }
}

/**
 * The first match of a lower-case needle at or after `from`, remembered: asked with non-decreasing `from`, a needle
 * missing from the rest of the body is searched for once, not once per call (linear over many calls).
 */
export const finder = (text: string, needle: string): (from: number) => number => {
  let found = -2
  let searchedFrom = 0
  return (from) => {
    if (found === -1 && from >= searchedFrom) return -1
    if (found >= from && from >= searchedFrom) return found
    searchedFrom = from
    found = indexOfCi(text, needle, from)
    return found
  }
}

const ATTRIBUTE = /([A-Za-z_][\w:.-]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))/g

/** The attributes of a tag header (`name="x" string="true"`), values as written. */
export const attributes = (header: string): ReadonlyMap<string, string> => {
  const out = new Map<string, string>()
  for (const m of header.matchAll(ATTRIBUTE)) {
    const key = (m[1] ?? "").toLowerCase()
    if (!out.has(key)) out.set(key, m[2] ?? m[3] ?? m[4] ?? "")
  }
  return out
}

/** A header's attribute `key`, trimmed; undefined when missing or blank. */
export const attribute = (header: string, key: string): string | undefined => {
  const value = attributes(header).get(key)?.trim()
  return value === undefined || value === "" ? undefined : value
}

/** A header written `=NAME` after a prefix that ends in `=`: the name is the whole header. */
export const wholeHeader = (header: string): string | undefined => {
  const name = header.trim()
  return name === "" ? undefined : name
}

interface Finders {
  readonly invoke: (from: number) => number
  readonly invokeEnd: (from: number) => number
  readonly param: (from: number) => number
  readonly paramEnd: (from: number) => number
  readonly headerEnd: (from: number) => number
  readonly jsonOpen: (from: number) => number
  readonly jsonClose: (from: number) => number
}

/** A tag's header `[start, end)` and where its content starts, or undefined when the header never ends. */
const header = (f: Finders, syntax: InvokeSyntax, start: number, limit: number) => {
  const end = f.headerEnd(start)
  return end < 0 || end > limit ? undefined : { start, end, content: end + syntax.headerEnd.length }
}

/** The arguments of one call, from `[from, end)`, or the reason they cannot be read. */
const readArguments = (
  body: string,
  f: Finders,
  syntax: InvokeSyntax,
  props: Readonly<Record<string, unknown>>,
  from: number,
  end: number
): Record<string, unknown> | string => {
  const args: Record<string, unknown> = {}
  let pos = from
  for (;;) {
    const at = f.param(pos)
    if (at < 0 || at >= end) break
    const h = header(f, syntax, at + syntax.param.length, end)
    if (h === undefined) return `${syntax.where}: unterminated ${syntax.param}`
    const key = syntax.paramName(body.slice(h.start, h.end))
    if (key === undefined) return `${syntax.where}: an argument has no name`
    const close = f.paramEnd(h.content)
    const next = f.param(h.content)
    // A missing close tag ends the value at the next argument or at the end of the call.
    const closedHere = close >= 0 && close < end && (next < 0 || close < next)
    const valueEnd = closedHere ? close : next >= 0 && next < end ? next : end
    args[key] = syntax.value(body.slice(h.content, valueEnd), body.slice(h.start, h.end), props[key])
    pos = closedHere ? close + syntax.paramEnd.length : valueEnd
  }
  if (Object.keys(args).length > 0 || syntax.jsonArgs === undefined) return args
  return jsonArguments(body, f, syntax, from, end)
}

/** Kimi K3's whole-object form, when a call has no per-argument elements. */
const jsonArguments = (
  body: string,
  f: Finders,
  syntax: InvokeSyntax,
  from: number,
  end: number
): Record<string, unknown> | string => {
  const json = syntax.jsonArgs
  const at = f.jsonOpen(from)
  if (json === undefined || at < 0 || at >= end) return {}
  const h = header(f, syntax, at + json.open.length, end)
  if (h === undefined) return `${syntax.where}: unterminated ${json.open}`
  const close = f.jsonClose(h.content)
  const text = body.slice(h.content, close >= 0 && close < end ? close : end)
  const parsed = parseJson(text.trim())
  if (parsed.ok && isRecord(parsed.value)) return { ...parsed.value }
  return `${syntax.where}: the JSON arguments are not an object`
}

/** Every call in a block body. `closed`: the block's close tag was seen (else its last call must be complete). */
export const parseInvokes = (
  syntax: InvokeSyntax,
  body: string,
  closed: boolean,
  tools: ReadonlyArray<RequestTool>
): BlockResult => {
  const f: Finders = {
    invoke: finder(body, syntax.invoke),
    invokeEnd: finder(body, syntax.invokeEnd),
    param: finder(body, syntax.param),
    paramEnd: finder(body, syntax.paramEnd),
    headerEnd: finder(body, syntax.headerEnd),
    jsonOpen: finder(body, syntax.jsonArgs?.open ?? syntax.invoke),
    jsonClose: finder(body, syntax.jsonArgs?.close ?? syntax.invokeEnd)
  }
  const out: Array<ParsedToolCall> = []
  let pos = 0
  for (;;) {
    const at = f.invoke(pos)
    if (at < 0) break
    const h = header(f, syntax, at + syntax.invoke.length, body.length)
    if (h === undefined) return malformed(`${syntax.where}: unterminated ${syntax.invoke}`)
    const name = syntax.callName(body.slice(h.start, h.end))
    if (name === undefined) return malformed(`${syntax.where}: a call has no name`)
    const end = f.invokeEnd(h.content)
    const following = f.invoke(h.content)
    const finished = end >= 0 && (following < 0 || end < following)
    // Without the block's close tag its last call must at least be complete.
    if (!finished && !closed && following < 0) {
      return malformed(`${syntax.where}: unterminated call to ${clip(name, REASON_PART_CHARS)}`)
    }
    const callEnd = finished ? end : following >= 0 ? following : body.length
    const args = readArguments(body, f, syntax, toolProperties(tools, name), h.content, callEnd)
    if (typeof args === "string") return malformed(args)
    out.push({ name, arguments: JSON.stringify(args) })
    pos = finished ? end + syntax.invokeEnd.length : callEnd
  }
  return out.length > 0 ? calls(out) : malformed(`${syntax.where}: no ${syntax.invoke}`)
}
