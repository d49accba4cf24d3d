/**
 * A JSON Schema `pattern` (an ECMAScript regular expression, unanchored unless it says `^`/`$`) as the GBNF of
 * the JSON string content it matches. Supported: literals, escapes (`\d \w \s` and their negations, `\t \n \r \f
 * \v \0 \xHH \uHHHH \u{H}`, escaped punctuation), classes and negated classes, `.`, groups (`(…)`, `(?:…)`,
 * `(?<name>…)`), alternation, `* + ? {m} {m,} {m,n}` (lazy or not: the same language), and `^`/`$` at the ends of
 * a top-level alternative. Anything else (lookarounds, backreferences, `\b`, `\p{…}`, anchors elsewhere, counts
 * past `MAX_REPETITION`) makes the whole pattern unsupported: the result is undefined.
 *
 * A regex character becomes the JSON text that denotes it: `"` and `\` escaped, controls as their escape, any
 * other character as itself (never as a `\u` escape: a subset of the JSON texts, every one of them matching) —
 * except `<` inside tool-call markup, written only as `\u003c` or `\u003C` (see `JsonRules`): a pattern that
 * allows `<` stays exact there.
 */
import { alt, cls, group, isSimpleAtom, lit, MAX_REPETITION, type RuleSet, seq } from "./gbnf.js"

type Ranges = ReadonlyArray<readonly [number, number]>

const MAX_CODE = 0x10ffff

const normalize = (ranges: Ranges): Ranges => {
  const sorted = [...ranges].sort((x, y) => x[0] - y[0])
  const out: Array<[number, number]> = []
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1]
    if (last !== undefined && lo <= last[1] + 1) last[1] = Math.max(last[1], hi)
    else out.push([lo, hi])
  }
  return out
}

const complement = (ranges: Ranges): Ranges => {
  const out: Array<readonly [number, number]> = []
  let next = 0
  for (const [lo, hi] of normalize(ranges)) {
    if (lo > next) out.push([next, lo - 1])
    next = hi + 1
  }
  if (next <= MAX_CODE) out.push([next, MAX_CODE])
  return out
}

const intersect = (a: Ranges, b: Ranges): Ranges => complement([...complement(a), ...complement(b)])

const DIGITS: Ranges = [[0x30, 0x39]]
const WORD: Ranges = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]]
const SPACE: Ranges = [
  [0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029], [0x202f, 0x202f],
  [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff]
]
const LINE_TERMINATORS: Ranges = [[0x0a, 0x0a], [0x0d, 0x0d], [0x2028, 0x2029]]
/** What a JSON string may hold as itself: not `"`, `\`, a control, or a surrogate (never a code point). */
const RAW: Ranges = [[0x20, 0x21], [0x23, 0x5b], [0x5d, 0xd7ff], [0xe000, MAX_CODE]]

const SHORT_ESCAPES: ReadonlyMap<number, string> = new Map([
  [0x22, "\\\""], [0x5c, "\\\\"], [0x08, "\\b"], [0x0c, "\\f"], [0x0a, "\\n"], [0x0d, "\\r"], [0x09, "\\t"]
])

const LT = 0x3c
/** `<` in markup: its escape, in either case. */
const ESCAPED_LT = seq(lit("\\u003"), cls([[0x43, 0x43], [0x63, 0x63]]))

/** The JSON text of any one character of `set`. */
const jsonChars = (set: Ranges, inMarkup: boolean): string | undefined => {
  const options: Array<string> = []
  const raw = intersect(set, inMarkup ? intersect(RAW, complement([[LT, LT]])) : RAW)
  if (raw.length > 0) options.push(cls(raw))
  for (const [lo, hi] of normalize(set)) {
    for (let c = lo; c <= Math.min(hi, 0x5c); c++) {
      if (inMarkup && c === LT) options.push(ESCAPED_LT)
      if (c >= 0x20 && c !== 0x22 && c !== 0x5c) continue
      options.push(lit(SHORT_ESCAPES.get(c) ?? `\\u${c.toString(16).padStart(4, "0")}`))
    }
  }
  return options.length === 0 ? undefined : alt(...options)
}

interface Parser {
  readonly src: string
  readonly inMarkup: boolean
  pos: number
}

const peek = (p: Parser): string | undefined => p.src[p.pos]

const HEX_RE = /^[0-9a-fA-F]+$/

const readHex = (p: Parser, n: number): number | undefined => {
  const text = p.src.slice(p.pos, p.pos + n)
  if (text.length !== n || !HEX_RE.test(text)) return undefined
  p.pos += n
  return parseInt(text, 16)
}

/** After a `\`: a character class (ranges) or undefined when unsupported. */
const escape = (p: Parser, inClass: boolean): Ranges | undefined => {
  const c = peek(p)
  if (c === undefined) return undefined
  p.pos++
  const one = (code: number): Ranges => [[code, code]]
  switch (c) {
    case "d":
      return DIGITS
    case "D":
      return complement(DIGITS)
    case "w":
      return WORD
    case "W":
      return complement(WORD)
    case "s":
      return SPACE
    case "S":
      return complement(SPACE)
    case "t":
      return one(9)
    case "n":
      return one(10)
    case "r":
      return one(13)
    case "f":
      return one(12)
    case "v":
      return one(11)
    case "0":
      return /[0-9]/.test(peek(p) ?? "") ? undefined : one(0)
    case "b":
      return inClass ? one(8) : undefined
    case "x": {
      const code = readHex(p, 2)
      return code === undefined ? undefined : one(code)
    }
    case "u": {
      if (peek(p) === "{") {
        const end = p.src.indexOf("}", p.pos)
        const text = p.src.slice(p.pos + 1, end)
        if (end < 0 || !HEX_RE.test(text) || parseInt(text, 16) > MAX_CODE) return undefined
        p.pos = end + 1
        return one(parseInt(text, 16))
      }
      const code = readHex(p, 4)
      return code === undefined ? undefined : one(code)
    }
    default:
      // Escaped punctuation is itself; an escaped letter or digit is a feature this compiler does not know.
      return /[A-Za-z0-9]/.test(c) ? undefined : one(c.codePointAt(0) ?? 0)
  }
}

const classItem = (p: Parser): Ranges | undefined => {
  const c = peek(p)
  if (c === undefined) return undefined
  if (c === "\\") {
    p.pos++
    return escape(p, true)
  }
  const code = p.src.codePointAt(p.pos) ?? 0
  p.pos += code > 0xffff ? 2 : 1
  return [[code, code]]
}

const charClass = (p: Parser): Ranges | undefined => {
  const negate = peek(p) === "^"
  if (negate) p.pos++
  const ranges: Array<readonly [number, number]> = []
  while (peek(p) !== "]") {
    const item = classItem(p)
    if (item === undefined) return undefined
    const single = item.length === 1 && item[0] !== undefined && item[0][0] === item[0][1] ? item[0][0] : undefined
    if (single !== undefined && peek(p) === "-" && p.src[p.pos + 1] !== "]" && p.pos + 1 < p.src.length) {
      p.pos++
      const upper = classItem(p)
      const hi = upper?.length === 1 && upper[0] !== undefined && upper[0][0] === upper[0][1] ? upper[0][0] : undefined
      if (hi === undefined || hi < single) return undefined
      ranges.push([single, hi])
    } else ranges.push(...item)
  }
  p.pos++
  return negate ? complement(ranges) : ranges
}

const quantifier = (p: Parser): readonly [number, number | undefined] | "none" | undefined => {
  const c = peek(p)
  let q: readonly [number, number | undefined] | "none" = "none"
  if (c === "*") q = [0, undefined]
  else if (c === "+") q = [1, undefined]
  else if (c === "?") q = [0, 1]
  else if (c === "{") {
    const m = /^\{(\d+)(,(\d*))?\}/.exec(p.src.slice(p.pos))
    if (m === null || m[1] === undefined) return "none"
    const min = Number(m[1])
    const max = m[2] === undefined ? min : m[3] === "" || m[3] === undefined ? undefined : Number(m[3])
    if (min > MAX_REPETITION || (max !== undefined && (max > MAX_REPETITION || max < min))) return undefined
    p.pos += m[0].length - 1
    q = [min, max]
  }
  if (q === "none") return q
  p.pos++
  if (peek(p) === "?") p.pos++
  return q
}

/** A character set's JSON text, a rule of its own when it is more than a class (shared, and repeated as one). */
const setRule = (p: Parser, rules: RuleSet, set: Ranges | undefined): string | undefined => {
  const e = set === undefined ? undefined : jsonChars(set, p.inMarkup)
  return e === undefined || isSimpleAtom(e) ? e : rules.define("re-char", e)
}

const atom = (p: Parser, rules: RuleSet, depth: number): string | undefined => {
  const c = peek(p)
  if (c === undefined) return undefined
  if (c === "(") {
    p.pos++
    if (p.src.startsWith("?:", p.pos)) p.pos += 2
    else if (/^\?<[A-Za-z_$][\w$]*>/.test(p.src.slice(p.pos))) p.pos = p.src.indexOf(">", p.pos) + 1
    else if (peek(p) === "?") return undefined
    const inner = disjunction(p, rules, depth + 1)
    if (inner === undefined || peek(p) !== ")") return undefined
    p.pos++
    return group(inner)
  }
  if (c === "[") {
    p.pos++
    return setRule(p, rules, charClass(p))
  }
  if (c === ".") {
    p.pos++
    return setRule(p, rules, complement(LINE_TERMINATORS))
  }
  if (c === "\\") {
    p.pos++
    return setRule(p, rules, escape(p, false))
  }
  if ("^$)|*+?{}]".includes(c)) return undefined
  const code = p.src.codePointAt(p.pos) ?? 0
  p.pos += code > 0xffff ? 2 : 1
  return setRule(p, rules, [[code, code]])
}

const alternative = (p: Parser, rules: RuleSet, depth: number): string | undefined => {
  const parts: Array<string> = []
  while (p.pos < p.src.length && peek(p) !== "|" && peek(p) !== ")") {
    if (depth === 0 && peek(p) === "$" && (p.pos + 1 === p.src.length || p.src[p.pos + 1] === "|")) break
    const a = atom(p, rules, depth)
    if (a === undefined) return undefined
    const q = quantifier(p)
    if (q === undefined) return undefined
    parts.push(q === "none" ? a : rules.repeat(a, q[0], q[1]))
  }
  return seq(...parts)
}

const disjunction = (p: Parser, rules: RuleSet, depth: number): string | undefined => {
  if (depth > 32) return undefined
  const options: Array<string> = []
  for (;;) {
    const a = alternative(p, rules, depth)
    if (a === undefined) return undefined
    options.push(a)
    if (peek(p) !== "|") return alt(...options)
    p.pos++
  }
}

/**
 * The GBNF of the JSON string content matching `pattern`, given the rule of any string character (`stringChar`,
 * written for the same place: in markup or not).
 */
export const patternContent = (
  rules: RuleSet,
  pattern: string,
  anyChar: string,
  inMarkup: boolean
): string | undefined => {
  const p: Parser = { src: pattern, pos: 0, inMarkup }
  const options: Array<string> = []
  for (;;) {
    const anchoredStart = peek(p) === "^"
    if (anchoredStart) p.pos++
    const body = alternative(p, rules, 0)
    if (body === undefined) return undefined
    const anchoredEnd = peek(p) === "$"
    if (anchoredEnd) p.pos++
    // An unanchored side matches anywhere: any characters may come before or after.
    options.push(seq(anchoredStart ? "" : `${anyChar}*`, body, anchoredEnd ? "" : `${anyChar}*`))
    if (p.pos === p.src.length) return alt(...options)
    if (peek(p) !== "|") return undefined
    p.pos++
  }
}
