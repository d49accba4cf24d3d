import { FastCheck as fc } from "effect"
import { describe, expect, it } from "vitest"
import { validateToolCalls } from "../../../src/chat/toolcalls/validate.js"
import { jsonSchemaGrammar } from "../../../src/providers/constraints/jsonSchemaGbnf.js"
import { accepts, makeRandom, parseGbnf, sample } from "../../support/gbnf.js"

/** Numeric bounds and `multipleOf`, compiled exactly: on the texts the grammar writes, it accepts what ajv accepts. */

const wrap = (schema: Readonly<Record<string, unknown>>) => ({
  type: "object",
  properties: { x: schema },
  required: ["x"],
  additionalProperties: false
})

const compiled = (schema: Readonly<Record<string, unknown>>) => {
  const result = jsonSchemaGrammar(wrap(schema))
  if (result._tag !== "Grammar") throw new Error(result._tag)
  const parsed = parseGbnf(result.grammar)
  if (!parsed.ok) throw new Error(parsed.error)
  const grammar = parsed.grammar
  const validObject = (text: string) =>
    validateToolCalls([{ name: "t", arguments: text }], [{ name: "t", parameters: wrap(schema) }], { _tag: "Required" })
      ._tag === "Valid"
  return {
    ...result,
    grammar,
    ok: (text: string) => accepts(grammar, `{"x":${text}}`),
    valid: (text: string) => validObject(`{"x":${text}}`),
    validObject
  }
}

/** The texts a bounded number is written as: no exponent, at most 15 significant digits, never `-0`. */
const inShape = (text: string): boolean => {
  const m = /^-?(0|[1-9][0-9]*)(?:\.([0-9]+))?$/.exec(text)
  if (m === null || /^-0(\.0+)?$/.test(text)) return false
  const int = m[1] ?? ""
  const frac = m[2] ?? ""
  return int === "0" ? frac.length <= 15 : int.length + frac.length <= 15
}

// Exact decimal arithmetic on texts, to step just inside and just outside a bound.
const SCALE = 30
const scaled = (text: string): bigint => {
  const negative = text.startsWith("-")
  const [int = "0", frac = ""] = text.replace("-", "").split(".")
  const v = BigInt(int + frac.padEnd(SCALE, "0").slice(0, SCALE))
  return negative ? -v : v
}
const unscaled = (v: bigint): string => {
  const digits = (v < 0n ? -v : v).toString().padStart(SCALE + 1, "0")
  const frac = digits.slice(-SCALE).replace(/0+$/, "")
  return `${v < 0n ? "-" : ""}${digits.slice(0, -SCALE)}${frac === "" ? "" : `.${frac}`}`
}
const around = (bound: string): ReadonlyArray<string> => {
  const b = scaled(bound)
  const steps = [...Array.from({ length: 18 }, (_, k) => 10n ** BigInt(SCALE - k)), 5n * 10n ** BigInt(SCALE - 1)]
  const out = [bound, bound.includes(".") ? `${bound}0` : `${bound}.0`, bound.includes(".") ? `${bound}00` : `${bound}.00`]
  for (const s of steps) out.push(unscaled(b - s), unscaled(b + s))
  return out
}

/** Bounds as decimal texts (their `Number` is the schema's value). */
const BOUNDED: ReadonlyArray<Readonly<Record<string, string>>> = [
  { minimum: "5", maximum: "30" },
  { minimum: "-3", exclusiveMaximum: "30" },
  { exclusiveMinimum: "-30", maximum: "-3" },
  { minimum: "0.05", maximum: "2.95" },
  { exclusiveMinimum: "-9.99", maximum: "9.9" },
  { exclusiveMinimum: "0", maximum: "1" },
  { minimum: "-2.5", exclusiveMaximum: "3.75" },
  { exclusiveMinimum: "-30.5", exclusiveMaximum: "-2.25" },
  { minimum: "0.1" },
  { exclusiveMaximum: "-0.001" },
  { minimum: "7.75", maximum: "7.75" },
  { exclusiveMinimum: "0.30000000000000004", maximum: "0.5" },
  { minimum: "0.0000001", exclusiveMaximum: "0.0001" },
  { maximum: "0" },
  { exclusiveMaximum: "0" },
  { minimum: "0" },
  { minimum: "5", exclusiveMinimum: "5", maximum: "6" },
  { minimum: "123456789012.5", maximum: "123456789013" },
  { minimum: "999999999999999" },
  { exclusiveMaximum: "-999999999999998.5" },
  { minimum: "-0.000000000000001", exclusiveMaximum: "0.000000000000002" }
]

const numberSchema = (bounds: Readonly<Record<string, string>>) =>
  ({ type: "number", ...Object.fromEntries(Object.entries(bounds).map(([k, v]) => [k, Number(v)])) })

describe("number bounds", () => {
  it("at, just inside and just outside every bound: accepted exactly when in shape and valid", () => {
    for (const bounds of BOUNDED) {
      const g = compiled(numberSchema(bounds))
      expect(g.unconstrained).toEqual([])
      const texts = [...Object.values(bounds).flatMap(around), "0", "-0", "0.0", "1", "-1", "1e1", "5E-1", "-", "01", "1."]
      for (const t of texts) expect(g.ok(t), `${JSON.stringify(bounds)}: ${t}`).toBe(inShape(t) && g.valid(t))
    }
  })

  it("random decimals near the bounds: accepted exactly when in shape and valid", () => {
    const compiledAll = BOUNDED.map((bounds) => ({ bounds, g: compiled(numberSchema(bounds)) }))
    const text = fc.tuple(
      fc.constantFrom("", "-"),
      fc.oneof(fc.integer({ min: 0, max: 40 }), fc.constantFrom(123456789012, 123456789013, 999999999999998, 999999999999999)),
      fc.option(fc.stringMatching(/^[0-9]{1,17}$/), { nil: undefined })
    ).map(([sign, int, frac]) => `${sign}${int}${frac === undefined ? "" : `.${frac}`}`)
    fc.assert(
      fc.property(fc.constantFrom(...compiledAll), text, ({ bounds, g }, t) => {
        expect(g.ok(t), `${JSON.stringify(bounds)}: ${t}`).toBe(inShape(t) && g.valid(t))
      }),
      { numRuns: 3000 }
    )
  })

  it("every sampled number lies within its bounds", () => {
    const random = makeRandom(7)
    for (const bounds of BOUNDED) {
      const g = compiled(numberSchema(bounds))
      for (let i = 0; i < 50; i++) {
        const text = sample(g.grammar, random)
        expect(g.validObject(text), `${JSON.stringify(bounds)}: ${text}`).toBe(true)
      }
    }
  })

  it("integer bounds that are fractions or exclusive: the integers strictly inside", () => {
    const g = compiled({ type: "integer", exclusiveMinimum: 2.5, exclusiveMaximum: 7 })
    expect([2, 3, 6, 7].map((n) => g.ok(String(n)))).toEqual([false, true, true, false])
    const none = compiled({ type: "integer", minimum: 1.2, maximum: 1.8 })
    expect(none.unconstrained).toEqual(["/properties/x/minimum", "/properties/x/maximum"])
  })

  it("a bounded number is small: set_climate's celsius in one line", () => {
    const g = compiled({ type: "number", minimum: 5, maximum: 30 })
    expect(g.bytes).toBeLessThan(400)
  })
})

describe("multipleOf", () => {
  it("integers within bounds: the multiples, listed", () => {
    const g = compiled({ type: "integer", minimum: 0, maximum: 100, multipleOf: 5 })
    expect(g.unconstrained).toEqual([])
    for (let n = -10; n <= 110; n++) expect(g.ok(String(n)), String(n)).toBe(g.valid(String(n)))
    for (const odd of [
      compiled({ type: "integer", exclusiveMinimum: -7.5, maximum: 20, multipleOf: 3 }),
      compiled({ type: "integer", exclusiveMinimum: -9, exclusiveMaximum: 21, multipleOf: 3 })
    ]) {
      for (let n = -12; n <= 25; n++) expect(odd.ok(String(n)), String(n)).toBe(odd.valid(String(n)))
    }
  })

  it("fractions within bounds: the multiples ajv accepts (x / step an integer in doubles)", () => {
    for (const step of [0.5, 0.25, 0.1, 1.5, 0.02]) {
      for (const bounds of [{ minimum: -1, maximum: 2 }, { exclusiveMinimum: -1, exclusiveMaximum: 1.5 }]) {
        const g = compiled({ type: "number", ...bounds, multipleOf: step })
        expect(g.unconstrained).toEqual([])
        for (let k = -150; k <= 250; k++) {
          const t = String(k / 100)
          expect(g.ok(t), `${step}: ${t}`).toBe(g.valid(t))
        }
      }
    }
    // ajv's own arithmetic: 0.3 / 0.1 is 2.9999999999999996.
    const tenth = compiled({ type: "number", minimum: 0, maximum: 1, multipleOf: 0.1 })
    expect([tenth.ok("0.2"), tenth.ok("0.3"), tenth.valid("0.3")]).toEqual([true, false, false])
  })

  it("a step that divides every integer bounds nothing; a number's multiple of 1 is an integer", () => {
    const half = compiled({ type: "integer", minimum: -3, maximum: 3, multipleOf: 0.5 })
    expect(half.unconstrained).toEqual([])
    expect([half.ok("-3"), half.ok("2"), half.ok("4")]).toEqual([true, true, false])
    const whole = compiled({ type: "number", minimum: -2.5, maximum: 1000, multipleOf: 1 })
    expect(whole.unconstrained).toEqual([])
    expect([whole.ok("-2"), whole.ok("-3"), whole.ok("1000"), whole.ok("1.5")]).toEqual([true, false, true, false])
  })

  it("too many, unbounded, or not a step: reported, the bounds still compiled", () => {
    const many = compiled({ type: "integer", minimum: 0, maximum: 1000, multipleOf: 2 })
    expect(many.unconstrained).toEqual(["/properties/x/multipleOf"])
    expect([many.ok("3"), many.ok("1001")]).toEqual([true, false])
    for (const schema of [{ type: "integer", minimum: 0, multipleOf: 5 }, { type: "number", multipleOf: 0 }, { type: "integer", multipleOf: -3, minimum: 0, maximum: 9 }]) {
      expect(compiled(schema).unconstrained).toEqual(["/properties/x/multipleOf"])
    }
    const none = compiled({ type: "integer", minimum: 1, maximum: 4, multipleOf: 5 })
    expect(none.unconstrained).toEqual(["/properties/x/multipleOf"])
    expect([none.ok("1"), none.ok("5")]).toEqual([true, false])
  })
})
