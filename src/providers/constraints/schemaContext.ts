/** What one schema compilation carries: its rules, what it left unconstrained, `$ref` rules, and the free values. */
import { alt, lit, opt, type RuleSet, seq } from "./gbnf.js"
import { integer, type JsonRules, number, quoted, stringChar, ws } from "./jsonPrimitives.js"

/** Inline nesting past this depth (not counting `$ref`s, which are rules) leaves the value unconstrained. */
export const MAX_SCHEMA_DEPTH = 64
/** Schema nodes compiled per grammar: past this many, the rest is left unconstrained (a guard, linear work). */
export const MAX_SCHEMA_NODES = 20_000

export interface Context extends JsonRules {
  /** The schema `$ref`s resolve in. */
  readonly root: unknown
  /** Prefix of the reported pointers (where the schema sits in the request). */
  readonly prefix: string
  readonly unconstrained: Array<string>
  /** `$ref` pointer → its rule. */
  readonly refs: Map<string, string>
  nodes: number
}

export const makeContext = (rules: RuleSet, root: unknown, prefix: string, inMarkup: boolean): Context => ({
  rules,
  inMarkup,
  root,
  prefix,
  unconstrained: [],
  refs: new Map(),
  nodes: 0
})

/** Records that the part of the schema at `pointer` (root-relative) is not enforced by the grammar. */
export const leaveUnconstrained = (ctx: Context, pointer: string): void => {
  const full = `${ctx.prefix}${pointer}`
  if (!ctx.unconstrained.includes(full)) ctx.unconstrained.push(full)
}

export const pointerToken = (key: string): string => key.replace(/~/g, "~0").replace(/\//g, "~1")

export const isRecord = (u: unknown): u is Readonly<Record<string, unknown>> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** The value at a JSON pointer (`""` or `/a/b`), or undefined. */
export const resolvePointer = (root: unknown, pointer: string): unknown => {
  if (pointer === "") return root
  if (!pointer.startsWith("/")) return undefined
  let at: unknown = root
  for (const raw of pointer.slice(1).split("/")) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~")
    if (Array.isArray(at)) at = /^(0|[1-9][0-9]*)$/.test(key) ? at[Number(key)] : undefined
    else if (isRecord(at)) at = Object.prototype.hasOwnProperty.call(at, key) ? at[key] : undefined
    else return undefined
  }
  return at
}

/** Any JSON string. */
export const anyString = (json: JsonRules): string => json.rules.define("string", quoted(`${stringChar(json)}*`))

/** The free values' rules are named per place (inside markup or not): one rule set may hold both. */
const key = (json: JsonRules, name: string): string => (json.inMarkup ? `${name}-in-markup` : name)

/** Any JSON value (recursive rules: objects and arrays of any values), with the grammar's bounded whitespace. */
export const anyValue = (json: JsonRules): string => {
  const { rules } = json
  const known = rules.named(key(json, "value"))
  if (known !== undefined) return known
  const value = rules.reserve("value")
  const w = ws(rules)
  const str = anyString(json)
  const member = seq(str, w, lit(":"), w, value, w)
  const object = rules.define(
    "object",
    seq(lit("{"), w, opt(seq(member, rules.repeat(seq(lit(","), w, member), 0, undefined))), lit("}"))
  )
  const element = seq(value, w)
  const array = rules.define(
    "array",
    seq(lit("["), w, opt(seq(element, rules.repeat(seq(lit(","), w, element), 0, undefined))), lit("]"))
  )
  rules.fill(value, alt(object, array, str, number(rules), lit("true"), lit("false"), lit("null")))
  rules.name(key(json, "value"), value)
  rules.name(key(json, "object"), object)
  rules.name(key(json, "array"), array)
  return value
}

/** Any JSON object, for `{"type": "object"}` with nothing else. */
export const anyObject = (json: JsonRules): string => {
  anyValue(json)
  return json.rules.named(key(json, "object")) ?? anyValue(json)
}

export const anyArray = (json: JsonRules): string => {
  anyValue(json)
  return json.rules.named(key(json, "array")) ?? anyValue(json)
}

export const anyOfType = (json: JsonRules, type: string): string => {
  switch (type) {
    case "null":
      return lit("null")
    case "boolean":
      return alt(lit("true"), lit("false"))
    case "string":
      return anyString(json)
    case "integer":
      return integer(json.rules)
    case "number":
      return number(json.rules)
    case "object":
      return anyObject(json)
    case "array":
      return anyArray(json)
    default:
      return anyValue(json)
  }
}
