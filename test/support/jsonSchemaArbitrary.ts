/**
 * Generators for the grammar compiler's properties: schemas of the subset it compiles exactly, values valid
 * against them (inside what the grammar writes: declared keys in schema order, bounded digits), and their JSON
 * text with random allowed whitespace.
 */
import { FastCheck as fc } from "effect"

type Schema = Readonly<Record<string, unknown>>

/** Patterns the compiler supports, each with values matching it. */
const PATTERNS: ReadonlyArray<string> = [
  "^[a-z]{2,5}$", "^\\d+(\\.\\d{1,2})?$", "^(foo|ba[rz])-[A-F0-9]{2}$", "^[^\"\\\\]{0,4}$", "^a.c$", "^\\w+@\\w+\\.com$",
  "ab", "^x?y*z+$", "^[\\s\\S]{1,3}$", "^\"\\\\\\n$", "^</?[a-z_]{1,9}>$"
]
const FORMATS = ["date", "time", "date-time", "uuid", "email"]

/** Ends of number bounds: integers, fractions, negative, tiny. */
const NUMBER_BOUNDS = [-1000, -30.5, -2.5, -1, -0.001, 0, 0.1, 0.25, 1, 5, 7.75, 30, 0.0000001, 12345.678]

/** A number with a lower end, an upper end or both, each inclusive or exclusive. */
const boundedNumber: fc.Arbitrary<Schema> = fc.tuple(
  fc.constantFrom(...NUMBER_BOUNDS),
  fc.constantFrom(...NUMBER_BOUNDS),
  fc.boolean(),
  fc.boolean(),
  fc.constantFrom("both", "lower", "upper")
)
  // Room for a thousandth strictly between the ends, so that the value generator has something to write.
  .filter(([lo, hi, , , sides]) => sides !== "both" || hi - lo >= 0.002)
  .map(([lo, hi, exLo, exHi, sides]) => ({
  type: "number",
  ...(sides === "upper" ? {} : { [exLo ? "exclusiveMinimum" : "minimum"]: lo }),
  ...(sides === "lower" ? {} : { [exHi ? "exclusiveMaximum" : "maximum"]: hi })
}))

const leaf: fc.Arbitrary<Schema> = fc.oneof(
  fc.record({ type: fc.constant("string"), minLength: fc.nat(3), maxLength: fc.integer({ min: 3, max: 8 }) }, {
    requiredKeys: ["type"]
  }),
  fc.constantFrom(...PATTERNS).map((pattern) => ({ type: "string", pattern })),
  fc.constantFrom(...FORMATS).map((format) => ({ type: "string", format })),
  fc.record({ type: fc.constant("integer"), minimum: fc.integer({ min: -300, max: 50 }), maximum: fc.integer({ min: 50, max: 5000 }) }, {
    requiredKeys: ["type"]
  }),
  fc.record({ type: fc.constant("integer"), exclusiveMinimum: fc.integer({ min: -20, max: 20 }) }),
  fc.constant({ type: "number" }),
  boundedNumber,
  fc.tuple(fc.constantFrom(3, 5, 7, 25), fc.integer({ min: -300, max: -30 }), fc.integer({ min: 30, max: 300 }), fc.boolean()).map(
    ([multipleOf, lo, hi, exclusive]) => ({ type: "integer", multipleOf, [exclusive ? "exclusiveMinimum" : "minimum"]: lo, maximum: hi })
  ),
  fc.tuple(fc.constantFrom(0.5, 0.25, 0.1, 1.5), fc.integer({ min: -10, max: -1 }), fc.integer({ min: 1, max: 10 })).map(
    ([multipleOf, minimum, maximum]) => ({ type: "number", multipleOf, minimum, maximum })
  ),
  fc.constant({ type: "boolean" }),
  fc.constant({ type: "null" }),
  fc.constant({ type: ["string", "null"], maxLength: 4 }),
  fc.array(fc.oneof(fc.string({ maxLength: 4 }), fc.integer({ min: -9, max: 99 }), fc.constant(null), fc.boolean()), {
    minLength: 1,
    maxLength: 4
  }).map((values) => ({ enum: values })),
  fc.constantFrom<unknown>("a\"b\\c\n", 7, { k: [1, "x"] }, "</tool_call>", { "<k>": "<v>" }).map((value) => ({ const: value })),
  fc.constant({})
)

export const schemaArbitrary: fc.Arbitrary<Schema> = fc.letrec<{ node: Schema; object: Schema }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    tie("object"),
    fc.record({ type: fc.constant("array"), items: tie("node"), minItems: fc.nat(2), maxItems: fc.integer({ min: 2, max: 4 }) }, {
      requiredKeys: ["type", "items"]
    }),
    fc.record({ type: fc.constant("array"), prefixItems: fc.array(tie("node"), { minLength: 1, maxLength: 2 }), items: fc.constant(false) }),
    fc.array(tie("node"), { minLength: 1, maxLength: 3 }).map((anyOf) => ({ anyOf })),
    fc.constant({ oneOf: [{ type: "string", maxLength: 3 }, { type: "integer" }, { type: "null" }] }),
    fc.constant({ $ref: "#/$defs/word" })
  ),
  object: fc.uniqueArray(fc.constantFrom("a", "b", "c d", "é", "q\"k", "n", "<k>"), { minLength: 0, maxLength: 4 }).chain((keys) =>
    fc.tuple(fc.array(tie("node"), { minLength: keys.length, maxLength: keys.length }), fc.subarray(keys), fc.boolean()).map(
      ([schemas, required, closed]) => ({
        type: "object",
        properties: Object.fromEntries(keys.map((k, i) => [k, schemas[i] ?? {}])),
        required,
        ...(closed ? { additionalProperties: false } : {})
      })
    )
  )
})).object.map((root) => ({ ...root, $defs: { word: { type: "string", pattern: "^[a-z]+$" } } }))

const noLoneSurrogate = (s: string) => !/\p{Cs}/u.test(s)
/** One character of a free string: any code point, often one of the tags' own (`<`, `/`, `>`). */
const stringUnit = fc.oneof(fc.constantFrom("<", "/", ">"), fc.string({ unit: "binary", minLength: 1, maxLength: 1 }))
const NUMBER_TEXT = /^-?(0|[1-9][0-9]{0,14})(\.[0-9]{1,23})?(e[-+]?[0-9]{1,2})?$/
/** A bounded number's text: no exponent, at most 15 significant digits. */
const BOUNDED_TEXT = /^-?(0\.[0-9]{1,15}|0|(?=[1-9](\.?[0-9]){0,14}$)[1-9][0-9]*(\.[0-9]+)?)$/
const NUMBER_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]

/** The keywords as ajv reads them (its `multipleOf`: `v / step` an integer, in doubles). */
const numberValid = (s: Schema, v: number): boolean => {
  const at = (k: string) => (typeof s[k] === "number" ? s[k] : undefined)
  const step = at("multipleOf")
  return (at("minimum") === undefined || v >= (at("minimum") ?? 0)) &&
    (at("exclusiveMinimum") === undefined || v > (at("exclusiveMinimum") ?? 0)) &&
    (at("maximum") === undefined || v <= (at("maximum") ?? 0)) &&
    (at("exclusiveMaximum") === undefined || v < (at("exclusiveMaximum") ?? 0)) &&
    (step === undefined || v / step === parseInt(String(v / step), 10))
}

const pad = (n: number) => (d: number) => String(d).padStart(n, "0")
const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
const date = fc.tuple(fc.integer({ min: 0, max: 9999 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 31 })).map(
  ([y, m, d]) => `${pad(4)(y)}-${pad(2)(m)}-${pad(2)(Math.min(d, DAYS[m - 1] ?? 28))}`
)
const time = fc.tuple(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 }), fc.integer({ min: 0, max: 59 }), fc.option(fc.integer({ min: 0, max: 999 })), fc.constantFrom("Z", "+05:30", "-11:00")).map(
  ([h, mi, s, ms, tz]) => `${pad(2)(h)}:${pad(2)(mi)}:${pad(2)(s)}${ms === null ? "" : `.${ms}`}${tz}`
)
const label = fc.stringMatching(/^[a-z0-9](?:[a-z0-9-]{0,5}[a-z0-9])?$/)

const formatValue = (format: string): fc.Arbitrary<string> => {
  switch (format) {
    case "date":
      return date
    case "time":
      return time
    case "date-time":
      return fc.tuple(date, time).map(([d, t]) => `${d}T${t}`)
    case "uuid":
      return fc.uuid()
    default:
      return fc.tuple(fc.stringMatching(/^[a-z0-9+_-]{1,6}(\.[a-z0-9]{1,3})?$/), fc.array(label, { minLength: 2, maxLength: 3 })).map(
        ([local, labels]) => `${local}@${labels.join(".")}`
      )
  }
}

const anyJson: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 2 }).filter((v) => {
  const text = JSON.stringify(v)
  return noLoneSurrogate(text) && !/[0-9]e|\d{16}|\.\d{25}/i.test(text)
})

/** `enum`/`const` values: the grammar writes them compact, so their text gets no whitespace. */
const LITERALS = new WeakSet<object>()
const literal = (v: unknown): unknown => {
  if (typeof v === "object" && v !== null) LITERALS.add(v)
  return v
}

/** Values valid against `schema` (of `schemaArbitrary`'s subset), `root` for its `$ref`s. */
export const valueArbitrary = (schema: unknown, root: Schema): fc.Arbitrary<unknown> => {
  if (typeof schema !== "object" || schema === null || Object.keys(schema).length === 0) return anyJson
  const s = schema as Schema
  if (typeof s["$ref"] === "string") return valueArbitrary((root["$defs"] as Schema)["word"], root)
  if ("const" in s) return fc.constant(literal(s["const"]))
  if (Array.isArray(s["enum"])) return fc.constantFrom(...(s["enum"] as Array<unknown>).map(literal))
  if (Array.isArray(s["anyOf"])) return fc.oneof(...s["anyOf"].map((b) => valueArbitrary(b, root)))
  if (Array.isArray(s["oneOf"])) return fc.oneof(...s["oneOf"].map((b) => valueArbitrary(b, root)))
  const type = s["type"]
  if (Array.isArray(type)) return fc.oneof(...type.map((t) => valueArbitrary({ ...s, type: t }, root)))
  switch (type) {
    case "string": {
      if (typeof s["pattern"] === "string") {
        return fc.stringMatching(new RegExp(s["pattern"], "u")).filter(noLoneSurrogate)
      }
      if (typeof s["format"] === "string") return formatValue(s["format"])
      const minLength = typeof s["minLength"] === "number" ? s["minLength"] : 0
      const maxLength = typeof s["maxLength"] === "number" ? s["maxLength"] : 10
      return fc.string({ unit: stringUnit, minLength, maxLength }).filter(noLoneSurrogate)
    }
    case "integer": {
      const min = typeof s["minimum"] === "number" ? s["minimum"] : typeof s["exclusiveMinimum"] === "number" ? s["exclusiveMinimum"] + 1 : -1e15 + 1
      const max = typeof s["maximum"] === "number" ? s["maximum"] : 1e15 - 1
      const step = typeof s["multipleOf"] === "number" ? s["multipleOf"] : 1
      return fc.integer({ min: Math.ceil(min / step), max: Math.floor(max / step) }).map((k) => (k === 0 ? 0 : k * step))
    }
    case "number": {
      if (!NUMBER_KEYWORDS.some((k) => typeof s[k] === "number")) {
        return fc.double({ min: -1e15, max: 1e15, noNaN: true }).filter((n) => NUMBER_TEXT.test(JSON.stringify(n)))
      }
      const num = (k: string) => (typeof s[k] === "number" ? s[k] : undefined)
      const lo = num("minimum") ?? num("exclusiveMinimum") ?? -1e6
      const hi = num("maximum") ?? num("exclusiveMaximum") ?? 1e6
      const step = num("multipleOf")
      // Thousandths (or the step's multiples) in the bounds, and the bounds themselves.
      const candidates = step === undefined
        ? fc.oneof(fc.integer({ min: Math.ceil(lo * 1000), max: Math.floor(hi * 1000) }).map((k) => k / 1000), fc.constantFrom(lo, hi))
        : fc.integer({ min: Math.ceil(lo / step), max: Math.floor(hi / step) }).map((k) => Number((k * step).toFixed(6)))
      return candidates.map((v) => (v === 0 ? 0 : v)).filter((v) => numberValid(s, v) && BOUNDED_TEXT.test(JSON.stringify(v)))
    }
    case "boolean":
      return fc.boolean()
    case "null":
      return fc.constant(null)
    case "array": {
      if (Array.isArray(s["prefixItems"])) return fc.tuple(...s["prefixItems"].map((b) => valueArbitrary(b, root)))
      const minLength = typeof s["minItems"] === "number" ? s["minItems"] : 0
      const maxLength = typeof s["maxItems"] === "number" ? s["maxItems"] : 3
      return fc.array(valueArbitrary(s["items"], root), { minLength, maxLength })
    }
    case "object": {
      const properties = (s["properties"] ?? {}) as Record<string, unknown>
      const required = new Set(s["required"] as Array<string>)
      const entries = Object.entries(properties).map(([k, sub]) =>
        fc.tuple(fc.constant(k), valueArbitrary(sub, root), required.has(k) ? fc.constant(true) : fc.boolean())
      )
      return fc.tuple(...entries).map((es) => Object.fromEntries(es.filter(([, , keep]) => keep).map(([k, v]) => [k, v])))
    }
    default:
      return anyJson
  }
}

/** A gap the grammar allows: nothing, a space, or a newline and up to 32 blanks. */
const gap = fc.oneof(fc.constant(""), fc.constant(" "), fc.stringMatching(/^\n[ \t]{0,32}$/))

/** JSON text of `value` with random whitespace in every gap (`gaps` supplies them in turn). */
export const jsonWithWhitespace = (value: unknown, gaps: ReadonlyArray<string>): string => {
  let i = 0
  const w = () => gaps[i++ % Math.max(1, gaps.length)] ?? ""
  const go = (v: unknown): string => {
    if (typeof v === "object" && v !== null && LITERALS.has(v)) return JSON.stringify(v)
    if (Array.isArray(v)) return `[${w()}${v.map((x) => `${go(x)}${w()}`).join(`,${w()}`)}]`
    if (typeof v === "object" && v !== null) {
      const members = Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}${w()}:${w()}${go(x)}${w()}`)
      return `{${w()}${members.join(`,${w()}`)}}`
    }
    return JSON.stringify(v)
  }
  return go(value)
}

export const gapsArbitrary = fc.array(gap, { minLength: 1, maxLength: 8 })
