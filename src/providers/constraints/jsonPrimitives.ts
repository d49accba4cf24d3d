/**
 * The JSON lexical rules a schema grammar is built of: bounded whitespace, string characters and their escapes,
 * numbers with a bounded count of digits, and the string formats (numeric bounds: `numberRange.ts`).
 */
import { alt, chars, cls, lit, opt, type RuleSet, seq } from "./gbnf.js"

/** After a newline, at most this many spaces or tabs: pretty-printed JSON fits, a run of blanks cannot go on. */
export const MAX_INDENT = 32
/**
 * An integer part has at most this many digits (exact in a double); a fraction at most 23, what `JSON.stringify`
 * writes for a double from 1e-7 up.
 */
export const MAX_INTEGER_DIGITS = 15
export const MAX_FRACTION_DIGITS = 23
export const MAX_INTEGER = 10 ** MAX_INTEGER_DIGITS - 1

/**
 * One gap between JSON tokens: nothing, one space, or a newline and an indent. Every gap of the grammar is one
 * `ws` (never two in a row), so a value's whitespace is bounded and parsing stays unambiguous.
 */
export const ws = (rules: RuleSet): string =>
  rules.define("ws", opt(alt(lit(" "), seq(lit("\n"), rules.repeat(cls([[0x20, 0x20], [0x09, 0x09]]), 0, MAX_INDENT)))))

const HEX = cls([[0x30, 0x39], [0x61, 0x66], [0x41, 0x46]])

/** The rules a JSON value is written with, and where the value sits. */
export interface JsonRules {
  readonly rules: RuleSet
  /**
   * The value sits inside tool-call markup, whose tags all start with `<`: its strings write `<` only as the escape
   * `\u003c` (the JSON decodes to the same text), so no tag can appear inside a value and end the call early.
   */
  readonly inMarkup: boolean
}

/** JSON text with each `<` (in JSON only ever inside a string) written `\u003c` when the value sits in markup. */
export const markupSafe = (json: string, inMarkup: boolean): string => (inMarkup ? json.replace(/</g, "\\u003c") : json)

/**
 * One character of a JSON string: any code point but `"`, `\` and the controls (and `<` in markup), or an escape.
 * A `\u` escape is never a surrogate, so that one grammar character is one code point (what `minLength`/`maxLength`
 * count, an escape being one); characters outside the BMP are written as themselves.
 */
export const stringChar = ({ inMarkup, rules }: JsonRules): string =>
  rules.define(
    inMarkup ? "char-in-markup" : "char",
    alt(
      cls([[0x22, 0x22], [0x5c, 0x5c], [0x00, 0x1f], ...(inMarkup ? [[0x3c, 0x3c] as const] : [])], true),
      seq(
        lit("\\"),
        alt(
          cls([[0x22, 0x22], [0x5c, 0x5c], [0x2f, 0x2f], [0x62, 0x62], [0x66, 0x66], [0x6e, 0x6e], [0x72, 0x72], [0x74, 0x74]]),
          seq(
            lit("u"),
            alt(
              seq(cls([[0x30, 0x39], [0x61, 0x63], [0x41, 0x43], [0x65, 0x66], [0x45, 0x46]]), rules.repeat(HEX, 3, 3)),
              seq(cls([[0x64, 0x64], [0x44, 0x44]]), cls([[0x30, 0x37]]), rules.repeat(HEX, 2, 2))
            )
          )
        )
      )
    )
  )

/** A JSON string whose content is `inner` (a sequence of JSON string characters). */
export const quoted = (inner: string): string => seq(lit("\""), inner, lit("\""))

export const DIGIT = cls([[0x30, 0x39]])

export const digits = (rules: RuleSet, n: number): string => rules.repeat(DIGIT, n, n)

/** A JSON integer of at most `MAX_INTEGER_DIGITS` digits. */
export const integer = (rules: RuleSet): string =>
  rules.define(
    "integer",
    seq(opt(lit("-")), alt(lit("0"), seq(cls([[0x31, 0x39]]), rules.repeat(DIGIT, 0, MAX_INTEGER_DIGITS - 1))))
  )

/** A JSON number: bounded digits, and an exponent of at most two digits (so the value stays finite). */
export const number = (rules: RuleSet): string =>
  rules.define(
    "number",
    seq(
      opt(lit("-")),
      alt(lit("0"), seq(cls([[0x31, 0x39]]), rules.repeat(DIGIT, 0, MAX_INTEGER_DIGITS - 1))),
      opt(seq(lit("."), rules.repeat(DIGIT, 1, MAX_FRACTION_DIGITS))),
      opt(seq(cls([[0x65, 0x65], [0x45, 0x45]]), opt(cls([[0x2d, 0x2d], [0x2b, 0x2b]])), rules.repeat(DIGIT, 1, 2)))
    )
  )

// Dates and times as ajv-formats' full mode checks them; every day a grammar allows exists (February stops at
// 28: the 29th would need the year's leap rule), leap seconds are left out.
const MONTH_31 = alt(lit("01"), lit("03"), lit("05"), lit("07"), lit("08"), lit("10"), lit("12"))
const MONTH_30 = alt(lit("04"), lit("06"), lit("09"), lit("11"))
const DAY_28 = alt(seq(lit("0"), cls([[0x31, 0x39]])), seq(lit("1"), DIGIT), seq(lit("2"), cls([[0x30, 0x38]])))
const DAY_29_30 = alt(lit("29"), lit("30"))

const date = (rules: RuleSet): string =>
  rules.define(
    "date",
    seq(
      digits(rules, 4),
      lit("-"),
      alt(
        seq(MONTH_31, lit("-"), alt(DAY_28, DAY_29_30, lit("31"))),
        seq(MONTH_30, lit("-"), alt(DAY_28, DAY_29_30)),
        seq(lit("02-"), DAY_28)
      )
    )
  )

const TWO_DIGIT_HOUR = alt(seq(cls([[0x30, 0x31]]), DIGIT), seq(lit("2"), cls([[0x30, 0x33]])))
const TWO_DIGIT_MINUTE = seq(cls([[0x30, 0x35]]), DIGIT)

const time = (rules: RuleSet): string =>
  rules.define(
    "time",
    seq(
      TWO_DIGIT_HOUR,
      lit(":"),
      TWO_DIGIT_MINUTE,
      lit(":"),
      TWO_DIGIT_MINUTE,
      opt(seq(lit("."), rules.repeat(DIGIT, 1, 9))),
      alt(lit("Z"), seq(cls([[0x2b, 0x2b], [0x2d, 0x2d]]), TWO_DIGIT_HOUR, lit(":"), TWO_DIGIT_MINUTE))
    )
  )

const HEX_LOWER = cls([[0x30, 0x39], [0x61, 0x66]])

const uuid = (rules: RuleSet): string => {
  const h = (n: number) => rules.repeat(HEX_LOWER, n, n)
  return rules.define("uuid", seq(h(8), lit("-"), h(4), lit("-"), h(4), lit("-"), h(4), lit("-"), h(12)))
}

// A dot-atom local part and a domain of at least two labels: a subset of ajv-formats' email (no `/`, which JSON
// may escape, and no quoted local parts).
const email = (rules: RuleSet): string => {
  const atom = rules.define("email-atom", rules.repeat(cls([[0x61, 0x7a], [0x41, 0x5a], [0x30, 0x39], ...chars("!#$%&'*+=?^_`{|}~-")]), 1, 64))
  const alnum = cls([[0x61, 0x7a], [0x41, 0x5a], [0x30, 0x39]])
  const label = rules.define(
    "email-label",
    seq(alnum, opt(seq(rules.repeat(cls([[0x61, 0x7a], [0x41, 0x5a], [0x30, 0x39], [0x2d, 0x2d]]), 0, 61), alnum)))
  )
  return rules.define(
    "email",
    seq(atom, rules.repeat(seq(lit("."), atom), 0, 8), lit("@"), label, rules.repeat(seq(lit("."), label), 1, 8))
  )
}

/** The JSON string (with its quotes) of a supported `format`, or undefined. */
export const formatString = (rules: RuleSet, format: string): string | undefined => {
  switch (format) {
    case "date":
      return quoted(date(rules))
    case "time":
      return quoted(time(rules))
    case "date-time":
      return quoted(seq(date(rules), lit("T"), time(rules)))
    case "uuid":
      return quoted(uuid(rules))
    case "email":
      return quoted(email(rules))
    default:
      return undefined
  }
}
