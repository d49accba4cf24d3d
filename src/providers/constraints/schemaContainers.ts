/**
 * Objects and arrays. Each value rule has no whitespace around it; a container puts one `ws` after each token it
 * writes (`{`, `[`, a key, `:`, `,`, each member), so every gap between JSON tokens is exactly one `ws`.
 */
import { alt, lit, MAX_REPETITION, opt, seq } from "./gbnf.js"
import { markupSafe, ws } from "./jsonPrimitives.js"
import { anyObject, anyString, anyValue, type Context, isRecord, leaveUnconstrained, pointerToken } from "./schemaContext.js"

/** Compiles a subschema (at a root-relative pointer) inside a container: after a token, so no left recursion. */
export type Sub = (schema: unknown, pointer: string) => string

const OBJECT_IGNORED = [
  "patternProperties", "propertyNames", "minProperties", "maxProperties", "dependentRequired", "dependentSchemas",
  "dependencies", "unevaluatedProperties"
] as const

/**
 * An object. Declared properties come in the schema's order, required ones mandatory, optional ones optional;
 * keys that are not declared are never written, whatever `additionalProperties` says (a grammar of arbitrary extra
 * keys beside declared ones is larger, and every object it leaves out was optional to write). Without
 * `properties`: `additionalProperties: false` is `{}`, a schema is a map of it, otherwise any object.
 */
export const objectGrammar = (ctx: Context, schema: Readonly<Record<string, unknown>>, at: string, sub: Sub): string => {
  const { rules } = ctx
  const w = ws(rules)
  for (const k of OBJECT_IGNORED) if (schema[k] !== undefined) leaveUnconstrained(ctx, `${at}/${k}`)
  const properties = isRecord(schema["properties"]) ? schema["properties"] : {}
  const required = new Set(Array.isArray(schema["required"]) ? schema["required"].filter((r) => typeof r === "string") : [])
  const additional = schema["additionalProperties"]
  const keys = Object.keys(properties)
  // A required key that is not declared is written with the schema of the other keys.
  for (const r of required) if (!keys.includes(r)) keys.push(r)
  if (keys.length === 0) {
    if (additional === false) return seq(lit("{"), w, lit("}"))
    if (additional === undefined || additional === true) return anyObject(ctx)
    const member = seq(anyString(ctx), w, lit(":"), w, sub(additional, `${at}/additionalProperties`), w)
    return seq(lit("{"), w, opt(seq(member, rules.repeat(seq(lit(","), w, member), 0, undefined))), lit("}"))
  }
  const member = (key: string): string => {
    const declared = Object.prototype.hasOwnProperty.call(properties, key)
    if (!declared && additional === false) leaveUnconstrained(ctx, `${at}/required`)
    const value = declared
      ? sub(properties[key], `${at}/properties/${pointerToken(key)}`)
      : additional === undefined || additional === false || additional === true
      ? anyValue(ctx)
      : sub(additional, `${at}/additionalProperties`)
    return seq(lit(markupSafe(JSON.stringify(key), ctx.inMarkup)), w, lit(":"), w, value, w)
  }
  const members = keys.map(member)
  const isRequired = keys.map((k) => required.has(k))
  const firstRequired = isRequired.indexOf(true)
  // How many members can come first: the optional ones before the first required one, and that one.
  const starts = firstRequired < 0 ? keys.length : firstRequired + 1
  // tails[i]: the members from i on, each after a comma, once a member was written. Shared by the starts, so
  // they are rules when there is more than one start (linear size instead of quadratic).
  const tails: Array<string> = new Array<string>(keys.length + 1).fill("\"\"")
  for (let i = keys.length - 1; i >= 1; i--) {
    const m = seq(lit(","), w, members[i] ?? "")
    const body = seq(isRequired[i] === true ? m : opt(m), tails[i + 1] ?? "")
    tails[i] = starts > 1 && i + 1 < keys.length ? rules.define("tail", body) : body
  }
  const options: Array<string> = []
  for (let i = 0; i < starts; i++) options.push(seq(members[i] ?? "", tails[i + 1] ?? ""))
  if (firstRequired < 0) options.push("\"\"")
  const inner = options.length === 2 && options[1] === "\"\"" && options[0] !== undefined ? opt(options[0]) : alt(...options)
  return seq(lit("{"), w, inner, lit("}"))
}

const countOf = (ctx: Context, schema: Readonly<Record<string, unknown>>, at: string, key: string): number | undefined => {
  const v = schema[key]
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) return undefined
  if (v > MAX_REPETITION) {
    // A count llama.cpp would expand into that many rules: the bound is left to validation.
    leaveUnconstrained(ctx, `${at}/${key}`)
    return undefined
  }
  return v
}

/**
 * An array: positional items (`prefixItems`, or draft-07's `items` array) then the rest (`items`, or draft-07's
 * `additionalItems`; absent: any value), with `minItems`/`maxItems` as counts.
 */
export const arrayGrammar = (ctx: Context, schema: Readonly<Record<string, unknown>>, at: string, sub: Sub): string => {
  const { rules } = ctx
  const w = ws(rules)
  for (const k of ["uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems"]) {
    if (schema[k] !== undefined && schema[k] !== false) leaveUnconstrained(ctx, `${at}/${k}`)
  }
  const items = schema["items"]
  const tuple = Array.isArray(schema["prefixItems"]) ? schema["prefixItems"] : Array.isArray(items) ? items : []
  const tupleKey = Array.isArray(schema["prefixItems"]) ? "prefixItems" : "items"
  const restSchema = Array.isArray(items) ? schema["additionalItems"] : items
  const restKey = Array.isArray(items) ? "additionalItems" : "items"
  const min = countOf(ctx, schema, at, "minItems") ?? 0
  let max = countOf(ctx, schema, at, "maxItems")
  if (restSchema === false) max = Math.min(max ?? tuple.length, tuple.length)
  const rest = restSchema === undefined || restSchema === true || restSchema === false
    ? anyValue(ctx)
    : sub(restSchema, `${at}/${restKey}`)
  const element = (i: number): string => seq(i < tuple.length ? sub(tuple[i], `${at}/${tupleKey}/${i}`) : rest, w)
  if (max === 0 || (max !== undefined && max < min)) return seq(lit("["), w, lit("]"))
  // The elements after the i-th (i ≥ 1 written): the positional ones nested, then the rest as a count.
  const after = (i: number): string => {
    if (i >= tuple.length) {
      return rules.repeat(seq(lit(","), w, rest, w), Math.max(0, min - i), max === undefined ? undefined : max - i)
    }
    if (max !== undefined && i >= max) return "\"\""
    const next = seq(lit(","), w, element(i), after(i + 1))
    return i < min ? next : opt(next)
  }
  const body = seq(element(0), after(1))
  return seq(lit("["), w, min >= 1 ? body : opt(body), lit("]"))
}
