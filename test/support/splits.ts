import { FastCheck as fc } from "effect"

/** Ways to cut a text into the deltas a stream may deliver it in: what every split-point property test uses. */

/** The text (or bytes) cut at these points (taken modulo its length + 1, deduplicated). */
export const splitAt = <T extends { readonly length: number; slice(start: number, end?: number): T }>(
  text: T,
  cuts: ReadonlyArray<number>
): ReadonlyArray<T> => {
  const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b)
  const chunks: Array<T> = []
  let from = 0
  for (const c of at) {
    chunks.push(text.slice(from, c))
    from = c
  }
  chunks.push(text.slice(from))
  return chunks
}

/** One code unit a delta. */
export const units = (text: string): ReadonlyArray<string> => text.split("")

/** `check` for every cut of the text into three deltas, and for one code unit a delta. */
export const everySplit = (text: string, check: (chunks: ReadonlyArray<string>) => void): void => {
  for (let i = 0; i <= text.length; i++) {
    for (let j = i; j <= text.length; j++) check([text.slice(0, i), text.slice(i, j), text.slice(j)])
  }
  check(units(text))
}

/** The text with each letter in a random case (tags match in any case). */
export const randomCase = (text: string): fc.Arbitrary<string> =>
  fc.array(fc.boolean(), { minLength: text.length, maxLength: text.length }).map((upper) =>
    Array.from(text, (ch, i) => (upper[i] ? ch.toUpperCase() : ch.toLowerCase())).join("")
  )
