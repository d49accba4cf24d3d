/**
 * Incremental, string-aware bracket depth of JSON text, one char code at a time. The state is one number
 * (depth * 4 + inString * 2 + escaped) so the scanners that use it allocate nothing per char.
 */

export type JsonScan = number

const QUOTE = 0x22
const BACKSLASH = 0x5c
const LBRACE = 0x7b
const RBRACE = 0x7d
const LBRACKET = 0x5b
const RBRACKET = 0x5d

/** The state just after an opening `{` or `[`. */
export const JSON_OPENED: JsonScan = 4

export const jsonStep = (s: JsonScan, c: number): JsonScan => {
  if ((s & 2) !== 0) {
    if ((s & 1) !== 0) return s - 1
    if (c === BACKSLASH) return s + 1
    return c === QUOTE ? s - 2 : s
  }
  if (c === QUOTE) return s + 2
  if (c === LBRACE || c === LBRACKET) return s + 4
  if (c === RBRACE || c === RBRACKET) return s - 4
  return s
}

/** The outermost value has closed. */
export const jsonClosed = (s: JsonScan): boolean => s <= 0
