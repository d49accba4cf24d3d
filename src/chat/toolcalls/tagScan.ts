/**
 * Incremental matching of a tag (an open hint or a close tag) in any case: streaming KMP, so each char is stepped
 * once and a partial match carries over from one delta to the next as a single number.
 */
import { lowerCode } from "./block.js"

/** A tag's lower-case char codes and its KMP failure function. */
export interface Pattern {
  readonly codes: ReadonlyArray<number>
  readonly fail: ReadonlyArray<number>
}

export const compilePattern = (tag: string): Pattern => {
  const codes = Array.from(tag, (ch) => lowerCode(ch.charCodeAt(0)))
  const fail = codes.map(() => 0)
  for (let i = 1, k = 0; i < codes.length; i++) {
    while (k > 0 && codes[i] !== codes[k]) k = fail[k - 1] ?? 0
    if (codes[i] === codes[k]) k++
    fail[i] = k
  }
  return { codes, fail }
}

/** How many chars of the tag the text ends with after char `c` (lower-cased), given `matched` before it. */
export const patternStep = (p: Pattern, matched: number, c: number): number => {
  let k = matched
  while (k > 0 && p.codes[k] !== c) k = p.fail[k - 1] ?? 0
  return p.codes[k] === c ? k + 1 : k
}
