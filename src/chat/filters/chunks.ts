/** Text held back by the hold-back scanner, as a list of chunks joined once (when its block ends). */

/**
 * Held text: `parts[0, length)`. Appending pushes onto `parts` while this is its longest holder and copies otherwise,
 * so a state appended to twice stays intact (a persistent list with amortised O(1) appends and one join at the end).
 */
export type Chunks = { readonly parts: Array<string>; readonly length: number } | undefined

export const push = (held: Chunks, text: string): Chunks => {
  if (text === "") return held
  if (held === undefined) return { parts: [text], length: 1 }
  const parts = held.parts.length === held.length ? held.parts : held.parts.slice(0, held.length)
  parts.push(text)
  return { parts, length: held.length + 1 }
}

export const join = (held: Chunks): string => {
  if (held === undefined) return ""
  if (held.length === 1) return held.parts[0] ?? ""
  return (held.parts.length === held.length ? held.parts : held.parts.slice(0, held.length)).join("")
}
