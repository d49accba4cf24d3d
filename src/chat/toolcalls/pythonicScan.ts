/**
 * Incremental scan of a pythonic call list from just after its `[`, one char code at a time: where the outer `]`
 * closes (brackets inside values and quotes of every kind are skipped), and as early as possible that the text
 * cannot be a call list (`[see above]`, `[x]`, `[see(above)]`). The state is one number, `depth * 64 + mode`, so
 * a scan allocates nothing per char.
 */
import { isWhitespace } from "./block.js"
import { isIdentChar, isIdentStart, isNameChar } from "./pythonic.js"

// Modes outside values.
const LIST = 0 // after `[`
const NAME = 1
const AFTER_NAME = 2
const ARGS = 3 // after `(` or a `,` between arguments
const KEY = 4
const AFTER_KEY = 5
const EQUALS = 6 // just after `=`
const VALUE_START = 7
const VALUE = 8 // inside a value; the depth counts its open brackets
const AFTER_CALL = 9
const NEXT = 10 // after a `,` between calls
const DONE = 11
const DEAD = 12
// Modes inside strings; + 1 for a double-quoted one.
const QUOTE_1 = 16 // one quote seen: a string, or the start of `''` / `'''`
const QUOTE_2 = 18 // two quotes: an empty string, or a triple-quoted one
const STRING = 20
const STRING_ESCAPE = 22
const TRIPLE = 24
const TRIPLE_1 = 26 // one closing quote seen
const TRIPLE_2 = 28
const TRIPLE_ESCAPE = 30

const MODES = 64
const SINGLE = 0x27
const DOUBLE = 0x22
const BACKSLASH = 0x5c

/** The scan state just after the opening `[`. */
export const PYTHONIC_OPENED = LIST

const at = (depth: number, mode: number): number => depth * MODES + mode

/** A char of a value at bracket depth `depth` (outside strings). */
const valueStep = (depth: number, c: number): number => {
  if (c === SINGLE) return at(depth, QUOTE_1)
  if (c === DOUBLE) return at(depth, QUOTE_1 + 1)
  if (c === 0x5b || c === 0x28 || c === 0x7b) return at(depth + 1, VALUE)
  if (c === 0x5d || c === 0x29 || c === 0x7d) {
    if (depth > 0) return at(depth - 1, VALUE)
    return c === 0x29 ? AFTER_CALL : DEAD
  }
  if (c === 0x2c && depth === 0) return ARGS
  return at(depth, VALUE)
}

/** A char inside a string; `mode` is the string mode without its quote bit. */
const stringStep = (depth: number, mode: number, double: number, c: number): number => {
  const quote = double === 1 ? DOUBLE : SINGLE
  const stay = (m: number): number => at(depth, m + double)
  switch (mode) {
    case QUOTE_1:
      if (c === quote) return stay(QUOTE_2)
      return stay(c === BACKSLASH ? STRING_ESCAPE : STRING)
    case QUOTE_2:
      return c === quote ? stay(TRIPLE) : valueStep(depth, c)
    case STRING:
      if (c === quote) return at(depth, VALUE)
      return stay(c === BACKSLASH ? STRING_ESCAPE : STRING)
    case STRING_ESCAPE:
      return stay(STRING)
    case TRIPLE_ESCAPE:
      return stay(TRIPLE)
    default: {
      // TRIPLE, TRIPLE_1, TRIPLE_2: the third closing quote in a row ends the string.
      if (c === BACKSLASH) return stay(TRIPLE_ESCAPE)
      if (c !== quote) return stay(TRIPLE)
      return mode === TRIPLE_2 ? at(depth, VALUE) : stay(mode === TRIPLE ? TRIPLE_1 : TRIPLE_2)
    }
  }
}

const startsLiteral = (c: number): boolean =>
  c === SINGLE || c === DOUBLE || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || c === 0x5b ||
  c === 0x28 || c === 0x7b || isIdentStart(c)

/** The next scan state after char code `c`. */
export const pythonicStep = (s: number, c: number): number => {
  const mode = s % MODES
  const depth = (s - mode) / MODES
  if (mode >= QUOTE_1) return stringStep(depth, mode - (mode % 2), mode % 2, c)
  const ws = isWhitespace(c)
  switch (mode) {
    case LIST:
      return ws ? LIST : isIdentStart(c) ? NAME : DEAD
    case NAME:
      return isNameChar(c) ? NAME : ws ? AFTER_NAME : c === 0x28 ? ARGS : DEAD
    case AFTER_NAME:
      return ws ? AFTER_NAME : c === 0x28 ? ARGS : DEAD
    case ARGS:
      return ws ? ARGS : isIdentStart(c) ? KEY : c === 0x29 ? AFTER_CALL : DEAD
    case KEY:
      return isIdentChar(c) ? KEY : ws ? AFTER_KEY : c === 0x3d ? EQUALS : DEAD
    case AFTER_KEY:
      return ws ? AFTER_KEY : c === 0x3d ? EQUALS : DEAD
    case EQUALS:
    case VALUE_START:
      // A value starts a literal: a quote, a number, a bracket, or a name (True, None, an r'' prefix).
      if (ws) return VALUE_START
      return startsLiteral(c) ? valueStep(0, c) : DEAD
    case VALUE:
      return valueStep(depth, c)
    case AFTER_CALL:
      return ws ? AFTER_CALL : c === 0x2c ? NEXT : c === 0x5d ? DONE : DEAD
    case NEXT:
      return ws ? NEXT : isIdentStart(c) ? NAME : c === 0x5d ? DONE : DEAD
    case DONE:
      return ws ? DONE : DEAD
    default:
      return DEAD
  }
}

/** The outer `]` has closed the list. */
export const pythonicClosed = (s: number): boolean => s === DONE

/** The text can no longer be a call list. */
export const pythonicDead = (s: number): boolean => s === DEAD
