/**
 * Numeric bounds as digit grammars: the JSON integers of a range; the JSON numbers (no exponent) of an interval
 * whose ends may be fractions, negative, exclusive or not; and the multiples of a `multipleOf` in a small interval,
 * listed.
 *
 * A bounded number is written with at most `MAX_SIGNIFICANT` significant digits. Decimals of at most 15 digits are
 * distinct doubles, so a text the grammar compares (exactly, as a decimal) with a bound's shortest decimal lands on
 * the same side of the bound once parsed, as ajv compares it (two doubles) — an exclusive bound included, where a
 * longer text such as `0.99999999999999999` for `exclusiveMaximum: 1` would parse to the bound itself.
 */
import { alt, cls, group, lit, opt, type RuleSet, seq } from "./gbnf.js"
import { DIGIT, digits, MAX_INTEGER, MAX_INTEGER_DIGITS } from "./jsonPrimitives.js"

export const MAX_SIGNIFICANT = MAX_INTEGER_DIGITS
/** A `multipleOf` is compiled as the list of its multiples when the interval holds at most this many. */
export const MAX_LISTED_MULTIPLES = 256

const digitClass = (lo: number, hi: number): string => (lo === hi ? lit(String(lo)) : cls([[0x30 + lo, 0x30 + hi]]))

/** The decimal strings (no leading zeros) of one length from `a` to `b`, as alternatives of sequences. */
const sameLength = (rules: RuleSet, a: string, b: string): ReadonlyArray<string> => {
  if (a === "") return ["\"\""]
  const k = a.length - 1
  const a0 = Number(a[0])
  const b0 = Number(b[0])
  const restA = a.slice(1)
  const restB = b.slice(1)
  if (a0 === b0) return sameLength(rules, restA, restB).map((s) => seq(lit(String(a0)), s))
  const out: Array<string> = []
  let from = a0
  let to = b0
  if (!/^0*$/.test(restA)) {
    out.push(...sameLength(rules, restA, "9".repeat(k)).map((s) => seq(lit(String(a0)), s)))
    from++
  }
  const bFull = /^9*$/.test(restB)
  if (!bFull) to--
  if (from <= to) out.push(seq(digitClass(from, to), digits(rules, k)))
  if (!bFull) out.push(...sameLength(rules, "0".repeat(k), restB).map((s) => seq(lit(String(b0)), s)))
  return out
}

/** The decimal strings of `len` digits of the integers from `a` to `b` (0 ≤ a), without leading zeros. */
const naturalsOfLength = (rules: RuleSet, a: number, b: number, len: number): ReadonlyArray<string> => {
  const lo = Math.max(a, len === 1 ? 0 : 10 ** (len - 1))
  const hi = Math.min(b, 10 ** len - 1)
  return lo <= hi ? sameLength(rules, String(lo), String(hi)) : []
}

/** The decimal strings of the integers from `a` to `b` (0 ≤ a), without leading zeros. */
const naturalRange = (rules: RuleSet, a: number, b: number): ReadonlyArray<string> => {
  const out: Array<string> = []
  for (let len = String(a).length; len <= String(b).length; len++) out.push(...naturalsOfLength(rules, a, b, len))
  return out
}

/**
 * The JSON integers from `lo` to `hi` (undefined: the digit bound), or undefined when there are none. Linear in
 * the digits squared: a `[0-9]{k}` tail covers every full decade.
 */
export const integerRange = (rules: RuleSet, lo: number | undefined, hi: number | undefined): string | undefined => {
  const a = Math.max(lo ?? -MAX_INTEGER, -MAX_INTEGER)
  const b = Math.min(hi ?? MAX_INTEGER, MAX_INTEGER)
  if (a > b) return undefined
  const options: Array<string> = []
  if (a < 0) {
    options.push(seq(lit("-"), alt(...naturalRange(rules, Math.max(1, -b), -a))))
  }
  if (b >= 0) options.push(...naturalRange(rules, Math.max(a, 0), b))
  return alt(...options)
}

/** One end of an interval: the bound, and whether the bound itself is out. */
export interface End {
  readonly value: number
  readonly exclusive: boolean
}

/** A non-negative decimal: its integer part (no leading zeros) and its fraction's digits (no trailing zeros). */
interface Decimal {
  readonly int: string
  readonly frac: string
}

/** The shortest decimal of a double (what JavaScript prints, and reads back to the same double), unsigned. */
const decimalOf = (x: number): Decimal => {
  const [mantissa = "0", exponent = "0"] = String(Math.abs(x)).split("e")
  const [int = "0", frac = ""] = mantissa.split(".")
  const all = int + frac
  const point = int.length + Number(exponent)
  const padded = point <= 0 ? "0".repeat(1 - point) + all : all.padEnd(point, "0")
  const at = Math.max(point, 1)
  return { int: padded.slice(0, at).replace(/^0+(?=\d)/, ""), frac: padded.slice(at).replace(/0+$/, "") }
}

/** One end of the fraction's digits: the bound's digits (`""`: zero), and whether the bound itself is out. */
interface FractionEnd {
  readonly digits: string
  readonly exclusive: boolean
}

/** Whether a fraction of value 0 (no digits, or zeros only) lies between the ends. */
const zeroBetween = (lo: FractionEnd | undefined, hi: FractionEnd | undefined): boolean =>
  (lo === undefined || (lo.digits === "" && !lo.exclusive)) && (hi === undefined || hi.digits !== "" || !hi.exclusive)

const firstDigit = (end: FractionEnd): number => Number(end.digits[0] ?? "0")

const rest = (end: FractionEnd): FractionEnd => ({ digits: end.digits.slice(1), exclusive: end.exclusive })

/**
 * The strings of `minLength` to `k` digits whose value as a fraction (`0.F`) lies between the ends (undefined: that
 * side is free), or undefined when there are none. Digit by digit: a first digit strictly between the ends' frees
 * the rest; one equal to an end's digit carries that end on. Linear in `k`: once the ends' digits differ, each side
 * goes on alone.
 */
const fractionDigits = (
  rules: RuleSet,
  k: number,
  lo: FractionEnd | undefined,
  hi: FractionEnd | undefined,
  minLength: number
): string | undefined => {
  if (k < minLength) return undefined
  // An end at 0 that lets 0 in bounds nothing below; one that lets nothing above 0 in leaves zeros only.
  if (lo !== undefined && lo.digits === "" && !lo.exclusive) return fractionDigits(rules, k, undefined, hi, minLength)
  if (lo === undefined && hi === undefined) return rules.repeat(DIGIT, minLength, k)
  if (lo === undefined && hi !== undefined && hi.digits === "") {
    return hi.exclusive ? undefined : rules.repeat(lit("0"), minLength, k)
  }
  const options: Array<string> = []
  if (minLength === 0 && zeroBetween(lo, hi)) options.push("\"\"")
  if (k > 0) {
    // -1 and 10: that side is free.
    const l = lo === undefined ? -1 : firstDigit(lo)
    const h = hi === undefined ? 10 : firstDigit(hi)
    const carried = (d: number): void => {
      const loRest = d === l && lo !== undefined ? rest(lo) : undefined
      const hiRest = d === h && hi !== undefined ? rest(hi) : undefined
      const tail = fractionDigits(rules, k - 1, loRest, hiRest, 0)
      if (tail !== undefined) options.push(seq(lit(String(d)), tail))
    }
    if (l >= 0 && l <= h) carried(l)
    const [from, to] = [l + 1, Math.min(h - 1, 9)]
    if (from <= to) options.push(seq(digitClass(from, to), rules.repeat(DIGIT, 0, k - 1)))
    if (h <= 9 && h > l) carried(h)
  }
  if (options.length === 0) return undefined
  return options.length === 1 ? options[0] : rules.define("frac", alt(...options))
}

/** What may follow an integer part: no fraction, or `.` and its digits, between the ends. */
const fraction = (rules: RuleSet, k: number, lo: FractionEnd | undefined, hi: FractionEnd | undefined): string | undefined => {
  const options: Array<string> = []
  if (zeroBetween(lo, hi)) options.push("\"\"")
  const tail = fractionDigits(rules, k, lo, hi, 1)
  if (tail !== undefined) options.push(seq(lit("."), tail))
  return options.length === 0 ? undefined : alt(...options)
}

/** The fraction digits an integer part leaves of `MAX_SIGNIFICANT` (a leading `0` is not significant). */
const fractionRoom = (int: number): number => (int === 0 ? MAX_SIGNIFICANT : MAX_SIGNIFICANT - String(int).length)

interface MagnitudeEnd {
  readonly at: Decimal
  readonly exclusive: boolean
}

const magnitudeEnd = (value: number, exclusive: boolean): MagnitudeEnd => ({ at: decimalOf(value), exclusive })

/**
 * The unsigned decimals from `lo` to `hi` (undefined: the digit bound). The integer parts strictly between the
 * ends take any fraction; an end's own integer part takes the fractions on its side of the end.
 */
const magnitude = (rules: RuleSet, lo: MagnitudeEnd, hi: MagnitudeEnd | undefined): string | undefined => {
  if (lo.at.int.length > MAX_INTEGER_DIGITS) return undefined
  // An upper end past the digit bound bounds nothing.
  const top = hi !== undefined && hi.at.int.length <= MAX_INTEGER_DIGITS ? hi : undefined
  const li = Number(lo.at.int)
  const hiInt = top === undefined ? undefined : Number(top.at.int)
  if (hiInt !== undefined && hiInt < li) return undefined
  const loFraction = { digits: lo.at.frac, exclusive: lo.exclusive }
  const hiFraction = top === undefined ? undefined : { digits: top.at.frac, exclusive: top.exclusive }
  const options: Array<string> = []
  const endPart = (int: number, flo: FractionEnd | undefined, fhi: FractionEnd | undefined): void => {
    const f = fraction(rules, fractionRoom(int), flo, fhi)
    if (f !== undefined) options.push(seq(lit(String(int)), f))
  }
  if (hiInt === li) endPart(li, loFraction, hiFraction)
  else {
    endPart(li, loFraction, undefined)
    const last = hiInt === undefined ? MAX_INTEGER : hiInt - 1
    for (let len = String(li + 1).length; len <= String(last).length; len++) {
      const ints = naturalsOfLength(rules, li + 1, last, len)
      const room = MAX_SIGNIFICANT - len
      if (ints.length > 0) options.push(seq(alt(...ints), room > 0 ? opt(seq(lit("."), rules.repeat(DIGIT, 1, room))) : ""))
    }
    if (hiInt !== undefined) endPart(hiInt, undefined, hiFraction)
  }
  return options.length === 0 ? undefined : alt(...options)
}

/**
 * The JSON numbers (no exponent, at most `MAX_SIGNIFICANT` significant digits, never `-0`) between the ends
 * (undefined: the digit bound on that side), or undefined when there are none.
 */
export const numberRange = (rules: RuleSet, lo: End | undefined, hi: End | undefined): string | undefined => {
  const options: Array<string> = []
  if (hi === undefined || hi.value > 0 || (hi.value === 0 && !hi.exclusive)) {
    const from = lo !== undefined && lo.value >= 0 ? magnitudeEnd(lo.value, lo.exclusive) : magnitudeEnd(0, false)
    const positive = magnitude(rules, from, hi === undefined ? undefined : magnitudeEnd(hi.value, hi.exclusive))
    if (positive !== undefined) options.push(positive)
  }
  if (lo === undefined || lo.value < 0) {
    // A negative value's magnitude: above 0 (or -hi), up to -lo.
    const from = hi !== undefined && hi.value < 0 ? magnitudeEnd(-hi.value, hi.exclusive) : magnitudeEnd(0, true)
    const negative = magnitude(rules, from, lo === undefined ? undefined : magnitudeEnd(-lo.value, lo.exclusive))
    if (negative !== undefined) options.push(seq(lit("-"), group(negative)))
  }
  return options.length === 0 ? undefined : alt(...options)
}

/** `k` times `step`, exactly, as a JSON number. */
const multipleText = (step: number, k: number): string => {
  const { frac, int } = decimalOf(step)
  const product = (BigInt(int + frac) * BigInt(Math.abs(k))).toString().padStart(frac.length + 1, "0")
  const whole = product.slice(0, product.length - frac.length)
  const fractionDigits = product.slice(product.length - frac.length).replace(/0+$/, "")
  const text = fractionDigits === "" ? whole : `${whole}.${fractionDigits}`
  return k < 0 && /[1-9]/.test(text) ? `-${text}` : text
}

/** ajv's `multipleOf`: `value / step` is an integer, computed in doubles (so 0.3 is not a multiple of 0.1). */
const isMultiple = (value: number, step: number): boolean => {
  const q = value / step
  return q === parseInt(String(q), 10)
}

const within = (value: number, lo: End, hi: End): boolean =>
  (lo.exclusive ? value > lo.value : value >= lo.value) && (hi.exclusive ? value < hi.value : value <= hi.value)

/**
 * The JSON texts of the multiples of `step` (> 0) between the ends that ajv accepts (each text checked as ajv
 * checks it: its double within the ends, `value / step` an integer, an integer when `integers`), or undefined when
 * the interval holds more than `MAX_LISTED_MULTIPLES`.
 */
export const multiplesBetween = (step: number, lo: End, hi: End, integers: boolean): ReadonlyArray<string> | undefined => {
  const first = Math.ceil(lo.value / step) - 1
  const last = Math.floor(hi.value / step) + 1
  if (!Number.isSafeInteger(first) || !Number.isSafeInteger(last) || last - first > MAX_LISTED_MULTIPLES + 1) return undefined
  const texts: Array<string> = []
  for (let k = first; k <= last; k++) {
    const text = multipleText(step, k)
    const value = Number(text)
    if (within(value, lo, hi) && isMultiple(value, step) && (!integers || Number.isInteger(value))) texts.push(text)
  }
  return texts
}
