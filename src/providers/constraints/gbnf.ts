/**
 * GBNF text building blocks (llama.cpp's grammar format, `grammars/README.md`): escaped literals and character
 * classes, sequences, alternatives, bounded repetitions, and a rule set that names, shares and counts rules.
 * An expression is GBNF text; `atomic` ones (a literal, a class, a rule name, a group) take a quantifier as is.
 */

/** A `{m,n}` count above this is not emitted: llama.cpp expands a repetition into one rule per count and refuses
 * counts past 2000 (`MAX_REPETITION_THRESHOLD`); the callers loosen the bound instead and report it. */
export const MAX_REPETITION = 1000

const hex = (code: number, width: number): string => code.toString(16).toUpperCase().padStart(width, "0")

/**
 * One code point inside a GBNF literal or class: the syntax characters escaped, controls as `\uXXXX`. Never `\xXX`:
 * xgrammar (vLLM's default backend, which reads this GBNF as its EBNF) takes every hex digit after `\x`, so
 * `\x1Fa` would be one code point there; `\u` is exactly four digits in both.
 */
const escapeChar = (ch: string, inClass: boolean): string => {
  const code = ch.codePointAt(0) ?? 0
  if (ch === "\\") return "\\\\"
  if (ch === "\n") return "\\n"
  if (ch === "\r") return "\\r"
  if (ch === "\t") return "\\t"
  if (!inClass && ch === "\"") return "\\\""
  // `\-` is not in older llama.cpp's escapes; `\u` is in every reader's.
  if (inClass && (ch === "-" || ch === "^")) return `\\u${hex(code, 4)}`
  if (inClass && (ch === "]" || ch === "[")) return `\\${ch}`
  if (code < 0x20 || code === 0x7f) return `\\u${hex(code, 4)}`
  // Line and paragraph separators and other invisible code points stay readable (and survive any transport).
  if (code === 0x2028 || code === 0x2029 || (code >= 0xd800 && code <= 0xdfff)) return `\\u${hex(code, 4)}`
  return ch
}

/** The literal `text`: `"…"`; the empty text is `""`. */
export const lit = (text: string): string => `"${Array.from(text, (c) => escapeChar(c, false)).join("")}"`

/** A character class over code-point ranges `[lo, hi]` (inclusive), negated when `negate`. */
export const cls = (ranges: ReadonlyArray<readonly [number, number]>, negate = false): string =>
  `[${negate ? "^" : ""}${
    ranges.map(([lo, hi]) => {
      const a = escapeChar(String.fromCodePoint(lo), true)
      return lo === hi ? a : `${a}-${escapeChar(String.fromCodePoint(hi), true)}`
    }).join("")
  }]`

/** The ranges of the characters of `chars` (for `cls`). */
export const chars = (text: string): ReadonlyArray<readonly [number, number]> =>
  Array.from(text, (c) => {
    const code = c.codePointAt(0) ?? 0
    return [code, code] as const
  })

const ATOM = /^(?:"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|[a-z0-9-]+)$/

/** A literal, a class or a rule name: what llama.cpp repeats without counting the rules inside a group. */
export const isSimpleAtom = (e: string): boolean => ATOM.test(e)

const isGroup = (e: string): boolean => {
  if (!e.startsWith("(") || !e.endsWith(")")) return false
  // The parentheses must be one pair around the whole text (quotes and classes skipped).
  let depth = 0
  for (let i = 0; i < e.length; i++) {
    const c = e[i]
    if (c === "\\") i++
    else if (c === "\"") {
      for (i++; i < e.length && e[i] !== "\""; i++) if (e[i] === "\\") i++
    } else if (c === "[") {
      for (i++; i < e.length && e[i] !== "]"; i++) if (e[i] === "\\") i++
    } else if (c === "(") depth++
    else if (c === ")") {
      depth--
      if (depth === 0 && i < e.length - 1) return false
    }
  }
  return true
}

export const isAtomic = (e: string): boolean => isSimpleAtom(e) || isGroup(e)

export const group = (e: string): string => (isAtomic(e) ? e : `(${e})`)

/** A sequence; empty parts (`""`) are dropped. */
export const seq = (...parts: ReadonlyArray<string>): string => {
  const kept = parts.filter((p) => p !== "" && p !== "\"\"")
  return kept.length === 0 ? "\"\"" : kept.join(" ")
}

/** Alternatives, duplicates dropped; one alternative is itself. */
export const alt = (...options: ReadonlyArray<string>): string => {
  const unique = [...new Set(options)]
  if (unique.length === 1 && unique[0] !== undefined) return unique[0]
  return `(${unique.join(" | ")})`
}

export const opt = (e: string): string => (e === "\"\"" ? e : `${group(e)}?`)

/** The rules of one grammar: named once, shared by body, counted for the size bound. */
export interface RuleSet {
  /** A rule with this body (the same body gets the same rule); its name starts with `hint`. */
  readonly define: (hint: string, body: string) => string
  /** A name for a rule whose body comes later (`fill`): what recursive rules need. */
  readonly reserve: (hint: string) => string
  readonly fill: (name: string, body: string) => void
  /** `x{min,max}` (`max` undefined: unbounded); a body llama.cpp would multiply is made a rule first. */
  readonly repeat: (e: string, min: number, max: number | undefined) => string
  /** The rules in definition order, `root` first when defined. */
  readonly rules: () => ReadonlyArray<readonly [string, string]>
  /** Well-known rules (the free JSON value, …) by a key of the caller's. */
  readonly named: (key: string) => string | undefined
  readonly name: (key: string, rule: string) => void
}

const sanitize = (hint: string): string => {
  const s = hint.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 40)
  return s === "" ? "r" : s
}

export const makeRuleSet = (): RuleSet => {
  const bodies = new Map<string, string>()
  const byBody = new Map<string, string>()
  const used = new Set<string>()
  const reserve = (hint: string): string => {
    const base = sanitize(hint)
    let name = base
    for (let i = 1; used.has(name); i++) name = `${base}-${i}`
    used.add(name)
    bodies.set(name, "")
    return name
  }
  const define = (hint: string, body: string): string => {
    const known = byBody.get(body)
    if (known !== undefined) return known
    // A body that is one rule name is that rule.
    if (/^[a-z0-9-]+$/.test(body) && used.has(body)) return body
    const name = reserve(hint)
    bodies.set(name, body)
    byBody.set(body, name)
    return name
  }
  const fill = (name: string, body: string): void => {
    bodies.set(name, body)
  }
  const repeat = (e: string, min: number, max: number | undefined): string => {
    if (max !== undefined && max <= 0) return "\"\""
    if (min === 0 && max === 1) return opt(e)
    if (min === 1 && max === 1) return e
    if (min === 0 && max === undefined) return `${group(e)}*`
    if (min === 1 && max === undefined) return `${group(e)}+`
    const item = isSimpleAtom(e) ? e : define("rep", e)
    return max === undefined ? `${item}{${min},}` : min === max ? `${item}{${min}}` : `${item}{${min},${max}}`
  }
  const rules = (): ReadonlyArray<readonly [string, string]> => {
    const all = [...bodies.entries()]
    return [...all.filter(([n]) => n === "root"), ...all.filter(([n]) => n !== "root")]
  }
  const known = new Map<string, string>()
  return {
    define,
    reserve,
    fill,
    repeat,
    rules,
    named: (key) => known.get(key),
    name: (key, rule) => {
      known.set(key, rule)
    }
  }
}

/** The grammar text: one rule a line. */
export const render = (rules: ReadonlyArray<readonly [string, string]>): string =>
  rules.map(([name, body]) => `${name} ::= ${body}\n`).join("")
