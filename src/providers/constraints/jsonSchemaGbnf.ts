/**
 * JSON Schema (draft 2020-12 / draft-07 subset) → GBNF, for llama.cpp's `grammar` request field.
 *
 * Soundness first: every text the grammar accepts parses as JSON and is valid against the schema, except for the
 * parts listed in `unconstrained` (JSON pointers to the keywords not enforced: that part of the value is any JSON
 * value of its type, left to validation after the fact). The grammar may accept fewer texts than the schema
 * allows: keys come in the schema's order and only declared keys are written (see `objectGrammar`), numbers have
 * bounded digits (a bounded number: no exponent, at most 15 significant digits, never `-0`; a `multipleOf` its
 * multiples' shortest texts), strings use no `\u` surrogate escapes (and inside tool-call markup write `<` only as
 * `\u003c`), `enum`/`const` objects are written compact in their own key order, February has 28 days (see
 * `jsonPrimitives.ts`), and whitespace is bounded (`ws`).
 *
 * Features: `type` (and type arrays), `properties`/`required`/`additionalProperties`, `items`/`prefixItems`/
 * `additionalItems`, `minItems`/`maxItems`, `enum`/`const`, `minLength`/`maxLength`, `pattern` (see
 * `regexGbnf.ts`), `format` (date, time, date-time, uuid, email), `minimum`/`maximum`/exclusive bounds of integers
 * and numbers as digit grammars, `multipleOf` as the list of its multiples within bounds holding at most 256 (see
 * `schemaNumbers.ts`), `anyOf`/`oneOf` as alternatives (`oneOf` reported unless its branches have distinct types),
 * `allOf` of one schema, and local `$ref`s (`#`, `#/$defs/…`, `#/definitions/…`, any local pointer) as rules,
 * recursion included; a `$ref` cycle that writes nothing before recurring (left recursion) is reported.
 */
import { DEFAULT_LIMITS, finish, type GrammarLimits, type GrammarResult } from "./bound.js"
import { alt, lit, MAX_REPETITION, makeRuleSet, type RuleSet } from "./gbnf.js"
import { formatString, markupSafe, quoted, stringChar } from "./jsonPrimitives.js"
import { patternContent } from "./regexGbnf.js"
import { arrayGrammar, objectGrammar } from "./schemaContainers.js"
import { integerGrammar, numberGrammar } from "./schemaNumbers.js"
import {
  anyOfType,
  anyValue,
  type Context,
  isRecord,
  leaveUnconstrained,
  makeContext,
  MAX_SCHEMA_DEPTH,
  MAX_SCHEMA_NODES,
  resolvePointer
} from "./schemaContext.js"

const STRING_KEYWORDS = ["minLength", "maxLength", "pattern", "format"]
const NUMBER_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]
const OBJECT_KEYWORDS = [
  "properties", "required", "additionalProperties", "patternProperties", "propertyNames", "minProperties",
  "maxProperties", "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties"
]
const ARRAY_KEYWORDS = [
  "items", "prefixItems", "additionalItems", "contains", "minContains", "maxContains", "minItems", "maxItems",
  "uniqueItems", "unevaluatedItems"
]
/** Validation keywords this compiler never enforces (ajv ignores unknown keywords, so those need no report). */
const NEVER_COMPILED = ["not", "if", "$dynamicRef", "$recursiveRef"]
const TYPE_KEYWORDS: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
  ["string", STRING_KEYWORDS],
  ["number", NUMBER_KEYWORDS],
  ["object", OBJECT_KEYWORDS],
  ["array", ARRAY_KEYWORDS]
]
const VALUE_KEYWORDS = ["type", "enum", "const", ...STRING_KEYWORDS, ...NUMBER_KEYWORDS, ...OBJECT_KEYWORDS, ...ARRAY_KEYWORDS]

type Schema = Readonly<Record<string, unknown>>

const present = (schema: Schema, keys: ReadonlyArray<string>): ReadonlyArray<string> =>
  keys.filter((k) => schema[k] !== undefined)

const reportAll = (ctx: Context, at: string, keys: ReadonlyArray<string>): void => {
  for (const k of keys) leaveUnconstrained(ctx, `${at}/${k}`)
}

/** The declared types, or those whose keywords the schema uses; undefined: any value. */
const typesOf = (schema: Schema): ReadonlyArray<string> | undefined => {
  const t = schema["type"]
  const declared = typeof t === "string" ? [t] : Array.isArray(t) ? t.filter((x) => typeof x === "string") : undefined
  const types = declared ?? TYPE_KEYWORDS.filter(([, keys]) => present(schema, keys).length > 0).map(([type]) => type)
  if (types.length === 0) return undefined
  const unique = [...new Set(types)]
  // `number` already holds every integer.
  return unique.includes("number") ? unique.filter((x) => x !== "integer") : unique
}

const hasType = (value: unknown, type: string): boolean => {
  switch (type) {
    case "null":
      return value === null
    case "boolean":
      return typeof value === "boolean"
    case "string":
      return typeof value === "string"
    case "integer":
      return typeof value === "number" && Number.isInteger(value)
    case "number":
      return typeof value === "number" && Number.isFinite(value)
    case "object":
      return isRecord(value)
    case "array":
      return Array.isArray(value)
    default:
      return false
  }
}

const count = (schema: Schema, key: string): number | undefined => {
  const v = schema[key]
  return typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : undefined
}

const stringGrammar = (ctx: Context, schema: Schema, at: string): string => {
  const { rules } = ctx
  const char = stringChar(ctx)
  const lengths = present(schema, ["minLength", "maxLength"])
  const pattern = schema["pattern"]
  if (typeof pattern === "string") {
    const content = patternContent(rules, pattern, char, ctx.inMarkup)
    if (content !== undefined) {
      // One constraint per string: the pattern; a length or format beside it is left to validation.
      reportAll(ctx, at, [...lengths, ...present(schema, ["format"])])
      return quoted(content)
    }
    leaveUnconstrained(ctx, `${at}/pattern`)
  }
  const format = schema["format"]
  if (typeof format === "string") {
    const formatted = formatString(rules, format)
    if (formatted !== undefined) {
      reportAll(ctx, at, lengths)
      return formatted
    }
    leaveUnconstrained(ctx, `${at}/format`)
  }
  let min = count(schema, "minLength") ?? 0
  let max = count(schema, "maxLength")
  if (min > MAX_REPETITION) {
    leaveUnconstrained(ctx, `${at}/minLength`)
    min = 0
  }
  if (max !== undefined && max > MAX_REPETITION) {
    leaveUnconstrained(ctx, `${at}/maxLength`)
    max = undefined
  }
  if (max !== undefined && max < min) {
    leaveUnconstrained(ctx, `${at}/maxLength`)
    max = undefined
  }
  return quoted(rules.repeat(char, min, max))
}

const typeGrammar = (ctx: Context, schema: Schema, at: string, type: string, depth: number): string => {
  const sub = (s: unknown, p: string) => compile(ctx, s, p, NOTHING_OPEN, depth + 1)
  switch (type) {
    case "string":
      return stringGrammar(ctx, schema, at)
    case "integer":
      return integerGrammar(ctx, schema, at)
    case "number":
      return numberGrammar(ctx, schema, at)
    case "object":
      return objectGrammar(ctx, schema, at, sub)
    case "array":
      return arrayGrammar(ctx, schema, at, sub)
    case "null":
    case "boolean":
      return anyOfType(ctx, type)
    default:
      leaveUnconstrained(ctx, `${at}/type`)
      return anyValue(ctx)
  }
}

const literals = (ctx: Context, schema: Schema, at: string): string => {
  const hasConst = Object.prototype.hasOwnProperty.call(schema, "const")
  if (hasConst && schema["enum"] !== undefined) leaveUnconstrained(ctx, `${at}/enum`)
  const values: ReadonlyArray<unknown> = hasConst ? [schema["const"]] : Array.isArray(schema["enum"]) ? schema["enum"] : []
  const types = typesOf({ type: schema["type"] })
  reportAll(ctx, at, present(schema, VALUE_KEYWORDS.filter((k) => k !== "type" && k !== "enum" && k !== "const")))
  const texts = values
    .filter((v) => types === undefined || types.some((t) => hasType(v, t) || (t === "number" && hasType(v, "integer"))))
    .flatMap((v) => {
      const text = JSON.stringify(v)
      return typeof text === "string" ? [lit(markupSafe(text, ctx.inMarkup))] : []
    })
  if (texts.length === 0) {
    // No value can be valid: nothing sound to write, validation answers.
    leaveUnconstrained(ctx, `${at}/${hasConst ? "const" : "enum"}`)
    return anyValue(ctx)
  }
  return alt(...texts)
}

const NOTHING_OPEN: ReadonlySet<string> = new Set()

const decodeFragment = (fragment: string): string | undefined =>
  /%(?![0-9a-fA-F]{2})/.test(fragment) ? undefined : decodeURIComponent(fragment)

/** A local `$ref` as a rule of its own. `open`: the refs entered since the last token written (left recursion). */
const refGrammar = (ctx: Context, ref: string, at: string, open: ReadonlySet<string>, depth: number): string => {
  const pointer = ref.startsWith("#") ? decodeFragment(ref.slice(1)) : undefined
  const target = pointer === undefined ? undefined : resolvePointer(ctx.root, pointer)
  if (pointer === undefined || target === undefined || open.has(pointer)) {
    leaveUnconstrained(ctx, `${at}/$ref`)
    return anyValue(ctx)
  }
  const known = ctx.refs.get(pointer)
  if (known !== undefined) return known
  const name = ctx.rules.reserve(`def-${pointer.split("/").pop() ?? ""}`)
  ctx.refs.set(pointer, name)
  ctx.rules.fill(name, compile(ctx, target, pointer, new Set([...open, pointer]), depth + 1))
  return name
}

/** `oneOf` is exact as alternatives when no value can match two branches: here, when their types differ. */
const disjointByType = (branches: ReadonlyArray<unknown>): boolean => {
  const types = branches.map((b) => (isRecord(b) && typeof b["type"] === "string" ? b["type"] : undefined))
  const numeric = types.filter((t) => t === "number" || t === "integer").length
  return types.every((t) => t !== undefined) && new Set(types).size === types.length && numeric <= 1
}

/** The GBNF expression of a JSON value valid against `schema` (at root-relative `at`), no whitespace around it. */
export const compile = (ctx: Context, schema: unknown, at: string, open: ReadonlySet<string>, depth: number): string => {
  ctx.nodes++
  if (schema === true || (isRecord(schema) && Object.keys(schema).length === 0)) return anyValue(ctx)
  if (!isRecord(schema) || depth > MAX_SCHEMA_DEPTH || ctx.nodes > MAX_SCHEMA_NODES) {
    leaveUnconstrained(ctx, at)
    return anyValue(ctx)
  }
  reportAll(ctx, at, present(schema, NEVER_COMPILED))
  const ref = schema["$ref"]
  if (typeof ref === "string") {
    reportAll(ctx, at, present(schema, [...VALUE_KEYWORDS, "anyOf", "oneOf", "allOf"]))
    return refGrammar(ctx, ref, at, open, depth)
  }
  const constrained = present(schema, VALUE_KEYWORDS).length > 0
  const allOf = schema["allOf"]
  if (allOf !== undefined) {
    if (Array.isArray(allOf) && allOf.length === 1 && !constrained && schema["anyOf"] === undefined && schema["oneOf"] === undefined) {
      return compile(ctx, allOf[0], `${at}/allOf/0`, open, depth + 1)
    }
    leaveUnconstrained(ctx, `${at}/allOf`)
  }
  const anyOf = Array.isArray(schema["anyOf"]) ? schema["anyOf"] : undefined
  const oneOf = Array.isArray(schema["oneOf"]) ? schema["oneOf"] : undefined
  const [branches, key] = anyOf !== undefined ? [anyOf, "anyOf"] : oneOf !== undefined ? [oneOf, "oneOf"] : [undefined, ""]
  if (anyOf !== undefined && oneOf !== undefined) leaveUnconstrained(ctx, `${at}/oneOf`)
  if (branches !== undefined) {
    if (constrained || branches.length === 0) leaveUnconstrained(ctx, `${at}/${key}`)
    else {
      if (key === "oneOf" && !disjointByType(branches)) leaveUnconstrained(ctx, `${at}/oneOf`)
      return alt(...branches.map((b, i) => compile(ctx, b, `${at}/${key}/${i}`, open, depth + 1)))
    }
  }
  if (schema["enum"] !== undefined || Object.prototype.hasOwnProperty.call(schema, "const")) {
    return literals(ctx, schema, at)
  }
  const types = typesOf(schema)
  if (types === undefined) return anyValue(ctx)
  return alt(...types.map((t) => typeGrammar(ctx, schema, at, t, depth)))
}

/**
 * Compiles one schema into `rules` (which the caller renders) as a rule of its own, named after `hint` (a `$ref`
 * to `#` is that rule); `prefix` is put before the reported pointers. `inMarkup`: the value sits inside tool-call
 * markup, so its strings write `<` only escaped (see `JsonRules`).
 */
export const compileInto = (
  rules: RuleSet,
  schema: unknown,
  hint: string,
  prefix: string,
  inMarkup: boolean
): { readonly rule: string; readonly unconstrained: ReadonlyArray<string> } => {
  const ctx = makeContext(rules, schema, prefix, inMarkup)
  const rule = rules.reserve(hint)
  ctx.refs.set("", rule)
  rules.fill(rule, compile(ctx, schema, "", new Set([""]), 0))
  return { rule, unconstrained: ctx.unconstrained }
}

/**
 * The grammar of one JSON value valid against `schema` (a `response_format: json_schema`'s schema): the value
 * alone, no whitespace around it, not inside markup (`<` written as itself). `prefix` is put before the reported
 * pointers.
 */
export const jsonSchemaGrammar = (schema: unknown, limits: GrammarLimits = DEFAULT_LIMITS, prefix = ""): GrammarResult => {
  const rules = makeRuleSet()
  const { unconstrained } = compileInto(rules, schema, "root", prefix, false)
  return finish(rules.rules(), unconstrained, limits)
}
