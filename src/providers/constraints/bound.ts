/** The size bound of a grammar: past it the caller sends no grammar and relies on validation alone. */
import { render } from "./gbnf.js"

export interface GrammarLimits {
  /** The grammar text, UTF-8 bytes. */
  readonly maxBytes: number
  /** Rules as llama.cpp counts them once parsed: the named ones plus one per count of each `{m,n}`. */
  readonly maxRules: number
}

export const DEFAULT_LIMITS: GrammarLimits = { maxBytes: 256 * 1024, maxRules: 20_000 }

export type GrammarResult =
  | {
    readonly _tag: "Grammar"
    /** GBNF text, `root` first: llama-server's `grammar` field. */
    readonly grammar: string
    /** JSON pointers (into the request) of the schema parts the grammar does not enforce. */
    readonly unconstrained: ReadonlyArray<string>
    readonly bytes: number
    readonly rules: number
  }
  | { readonly _tag: "TooLarge"; readonly bytes: number; readonly rules: number; readonly limits: GrammarLimits }

/** Rules llama.cpp makes of the text: one per rule, and per repetition one per count (`x{2,5}`: 5, `x{3,}`: 3). */
export const expandedRuleCount = (text: string): number => {
  let count = 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (c === "\\") i++
    else if (c === "\"") {
      for (i++; i < text.length && text[i] !== "\""; i++) if (text[i] === "\\") i++
    } else if (c === "[") {
      for (i++; i < text.length && text[i] !== "]"; i++) if (text[i] === "\\") i++
    } else if (c === "\n") count++
    else if (c === "{") {
      const m = /^\{(\d+)(?:,(\d*))?\}/.exec(text.slice(i, i + 24))
      if (m !== null) count += Math.max(Number(m[1]), Number(m[2] === undefined || m[2] === "" ? 1 : m[2]))
    }
    else if (c === "*" || c === "+" || c === "?") count++
  }
  return count
}

export const finish = (
  rules: ReadonlyArray<readonly [string, string]>,
  unconstrained: ReadonlyArray<string>,
  limits: GrammarLimits
): GrammarResult => {
  const grammar = render(rules)
  const bytes = new TextEncoder().encode(grammar).length
  const count = expandedRuleCount(grammar)
  if (bytes > limits.maxBytes || count > limits.maxRules) return { _tag: "TooLarge", bytes, rules: count, limits }
  return { _tag: "Grammar", grammar, unconstrained, bytes, rules: count }
}
