/**
 * Integers and numbers: `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum` as digit grammars (fractional and
 * negative ends included), `multipleOf` as the list of its multiples when the bounds hold few of them. A keyword
 * that does not fit is reported and left to validation.
 */
import { alt, lit } from "./gbnf.js"
import { integer, number } from "./jsonPrimitives.js"
import { type End, integerRange, multiplesBetween, numberRange } from "./numberRange.js"
import { type Context, leaveUnconstrained } from "./schemaContext.js"

type Schema = Readonly<Record<string, unknown>>

const BOUNDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] as const

const finiteAt = (schema: Schema, key: string): number | undefined => {
  const v = schema[key]
  return typeof v === "number" && Number.isFinite(v) ? v : undefined
}

/** The tighter of `minimum` and `exclusiveMinimum` (the exclusive one when they are equal). */
const lowerEnd = (schema: Schema): End | undefined => {
  const min = finiteAt(schema, "minimum")
  const ex = finiteAt(schema, "exclusiveMinimum")
  if (ex !== undefined && (min === undefined || ex >= min)) return { value: ex, exclusive: true }
  return min === undefined ? undefined : { value: min, exclusive: false }
}

const upperEnd = (schema: Schema): End | undefined => {
  const max = finiteAt(schema, "maximum")
  const ex = finiteAt(schema, "exclusiveMaximum")
  if (ex !== undefined && (max === undefined || ex <= max)) return { value: ex, exclusive: true }
  return max === undefined ? undefined : { value: max, exclusive: false }
}

const reportBounds = (ctx: Context, schema: Schema, at: string): void => {
  for (const k of BOUNDS) if (schema[k] !== undefined) leaveUnconstrained(ctx, `${at}/${k}`)
}

/** The integers between the ends; none: the bounds are reported (no value can be valid, validation answers). */
const integersBetween = (ctx: Context, schema: Schema, at: string, lo: End | undefined, hi: End | undefined): string => {
  if (lo === undefined && hi === undefined) return integer(ctx.rules)
  const a = lo === undefined ? undefined : lo.exclusive ? Math.floor(lo.value) + 1 : Math.ceil(lo.value)
  const b = hi === undefined ? undefined : hi.exclusive ? Math.ceil(hi.value) - 1 : Math.floor(hi.value)
  const range = integerRange(ctx.rules, a, b)
  if (range === undefined) {
    reportBounds(ctx, schema, at)
    return integer(ctx.rules)
  }
  return ctx.rules.define("int-range", range)
}

/** The listed multiples, or undefined with `multipleOf` reported (unbounded, too many, none, or not a step). */
const listedMultiples = (
  ctx: Context,
  step: unknown,
  at: string,
  lo: End | undefined,
  hi: End | undefined,
  integers: boolean
): string | undefined => {
  const texts = typeof step === "number" && Number.isFinite(step) && step > 0 && lo !== undefined && hi !== undefined
    ? multiplesBetween(step, lo, hi, integers)
    : undefined
  if (texts === undefined || texts.length === 0) {
    leaveUnconstrained(ctx, `${at}/multipleOf`)
    return undefined
  }
  return ctx.rules.define("multiples", alt(...texts.map(lit)))
}

/** `step` divides every integer as ajv divides (`1`, `0.5`, `0.25`, …: the quotient is exact). */
const dividesEveryInteger = (step: unknown): boolean => {
  if (typeof step !== "number" || !(step > 0) || step > 1) return false
  const inverse = 1 / step
  return Number.isInteger(inverse) && inverse <= 2 ** 30 && (inverse & (inverse - 1)) === 0
}

export const integerGrammar = (ctx: Context, schema: Schema, at: string): string => {
  const lo = lowerEnd(schema)
  const hi = upperEnd(schema)
  const step = schema["multipleOf"]
  if (step !== undefined && !dividesEveryInteger(step)) {
    const listed = listedMultiples(ctx, step, at, lo, hi, true)
    if (listed !== undefined) return listed
  }
  return integersBetween(ctx, schema, at, lo, hi)
}

/** A bounded number has no exponent and at most 15 significant digits (`numberRange.ts` says why). */
export const numberGrammar = (ctx: Context, schema: Schema, at: string): string => {
  const lo = lowerEnd(schema)
  const hi = upperEnd(schema)
  const step = schema["multipleOf"]
  // A multiple of 1 is an integer (ajv: `x / 1` an integer).
  if (step === 1) return integersBetween(ctx, schema, at, lo, hi)
  if (step !== undefined) {
    const listed = listedMultiples(ctx, step, at, lo, hi, false)
    if (listed !== undefined) return listed
  }
  if (lo === undefined && hi === undefined) return number(ctx.rules)
  const range = numberRange(ctx.rules, lo, hi)
  if (range === undefined) {
    reportBounds(ctx, schema, at)
    return number(ctx.rules)
  }
  return ctx.rules.define("num-range", range)
}
