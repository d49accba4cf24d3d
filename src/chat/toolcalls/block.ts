/** What the text formats declare to the hold-back scanner, and what a block of markup parses into. */
import type { ParsedToolCall, RequestTool, TextFormat } from "./types.js"

/** What a block of markup parsed into: its calls (at least one), or why it is malformed. */
export type BlockResult =
  | { readonly _tag: "Calls"; readonly calls: ReadonlyArray<ParsedToolCall> }
  | { readonly _tag: "Malformed"; readonly reason: string }

export const calls = (list: ReadonlyArray<ParsedToolCall>): BlockResult => ({ _tag: "Calls", calls: list })
export const malformed = (reason: string): BlockResult => ({ _tag: "Malformed", reason })

/** A format whose block runs from an open tag to a close tag. Tags match in any case. */
export interface TagFormat {
  readonly format: TextFormat
  readonly open: string
  readonly close: string
  /** How much of `open` makes a dangling open tag at the end of the stream markup rather than text. */
  readonly committed: number
  /** Formats that share an open tag are told apart by their body. */
  readonly claims: (body: string) => boolean
  /** `closed`: the close tag was seen; otherwise the block ended at the end of the stream or at the next open tag. */
  readonly parse: (body: string, closed: boolean, tools: ReadonlyArray<RequestTool>) => BlockResult
}

/** A format whose block ends where an incremental scan of its body says so (numbers keep the scan allocation-free). */
export interface ScannedFormat {
  readonly format: TextFormat
  readonly open: string
  readonly committed: number
  readonly start: number
  readonly step: (state: number, charCode: number) => number
  readonly done: (state: number) => boolean
  /** `complete`: the scan reached its end; otherwise the stream ended inside the block. */
  readonly parse: (body: string, complete: boolean, tools: ReadonlyArray<RequestTool>) => BlockResult
}

/**
 * A shape without markers of its own (bare JSON, a pythonic call list): a call only when it is the whole response
 * (after leading whitespace) and names request tools; otherwise it is text, so prose is not misread.
 */
export interface BareFormat {
  readonly format: TextFormat
  /** The char code the shape starts with, after leading whitespace (`{`, `[`). */
  readonly first: number
  /** The scan state just after `first`. */
  readonly start: number
  readonly step: (state: number, charCode: number) => number
  /** The shape has closed: only whitespace may follow. */
  readonly done: (state: number) => boolean
  /** The text can no longer be this shape (release it as text at once). */
  readonly dead: (state: number) => boolean
  /** The whole trimmed response → its calls, or undefined when it is text (e.g. it names a tool not declared). */
  readonly parse: (text: string, tools: ReadonlyArray<RequestTool>) => ReadonlyArray<ParsedToolCall> | undefined
}

/** What `String.prototype.trim` and `\s` count as whitespace. */
export const isWhitespace = (c: number): boolean =>
  c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09 || c === 0x0c || c === 0x0b || c === 0xa0 ||
  c === 0xfeff || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f ||
  c === 0x3000 || c === 0x1680

/** ASCII lower case of one char code; other chars as they are. */
export const lowerCode = (c: number): number => (c >= 0x41 && c <= 0x5a ? c | 0x20 : c)

/** `indexOf` of an ASCII needle (given in lower case) in any case, without lower-casing the haystack. */
export const indexOfCi = (text: string, needle: string, from: number): number => {
  const last = text.length - needle.length
  outer: for (let i = Math.max(0, from); i <= last; i++) {
    for (let k = 0; k < needle.length; k++) {
      if (lowerCode(text.charCodeAt(i + k)) !== needle.charCodeAt(k)) continue outer
    }
    return i
  }
  return -1
}

/** A TagFormat by the usual rules: the open tag commits with all but its last char, and no other format shares it. */
export const tagFormat = (fields: Pick<TagFormat, "format" | "open" | "close" | "parse">): TagFormat => ({
  ...fields,
  committed: fields.open.length - 1,
  claims: () => true
})
