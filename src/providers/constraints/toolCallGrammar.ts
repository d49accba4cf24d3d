/**
 * The grammar of a whole answer in the edge's text mode (Hermes markup, what `toolsPrompt` teaches):
 * `<tool_call>\n{"name": "<tool>", "arguments": <args>}\n</tool_call>`, calls one a line, with the arguments
 * compiled from each tool's `parameters` (`jsonSchemaGbnf.ts`); and the grammar of a `response_format`.
 */
import { DEFAULT_LIMITS, finish, type GrammarLimits, type GrammarResult } from "./bound.js"
import { alt, cls, lit, makeRuleSet, opt, type RuleSet, seq } from "./gbnf.js"
import { markupSafe } from "./jsonPrimitives.js"
import { compileInto, jsonSchemaGrammar } from "./jsonSchemaGbnf.js"
import { anyObject, isRecord } from "./schemaContext.js"

/** At most this many calls in one answer (with parallel calls): a model cannot write calls forever. */
export const MAX_CALLS = 16

export const OPEN_TAG = "<tool_call>"

export interface GrammarTool {
  readonly function: { readonly name: string; readonly parameters?: unknown }
}

export type GrammarToolChoice = "none" | "auto" | "required" | { readonly function: { readonly name: string } }

export interface ToolCallGrammarRequest {
  readonly tools: ReadonlyArray<GrammarTool>
  readonly toolChoice?: GrammarToolChoice | undefined
  readonly parallelToolCalls?: boolean | undefined
}

/** Why no grammar is sent: nothing to constrain, or a forced tool the request does not have (validation says so). */
export type NoGrammar = {
  readonly _tag: "NoGrammar"
  readonly reason: "NoTools" | "ToolChoiceNone" | "UnknownTool" | "NotJsonSchema"
}

export type ToolCallGrammar = GrammarResult | NoGrammar

const noGrammar = (reason: NoGrammar["reason"]): NoGrammar => ({ _tag: "NoGrammar", reason })

/**
 * Text that never holds `tag`: a right-linear grammar of the matcher's states (`text-k`: the last k characters
 * are the tag's first k), with no rule that reaches the whole tag. Needs a tag whose first character does not
 * recur in it (then a mismatch falls back to state 0, or to 1 on that character).
 */
export const textWithout = (rules: RuleSet, tag: string): string | undefined => {
  const cs = Array.from(tag)
  const first = cs[0]
  if (first === undefined || cs.slice(1).includes(first)) return undefined
  const code = (c: string) => c.codePointAt(0) ?? 0
  const names = cs.map((_, k) => rules.reserve(`text-${k}`))
  const state = (k: number) => names[k] ?? ""
  rules.fill(state(0), seq(`${cls([[code(first), code(first)]], true)}*`, opt(seq(lit(first), state(1)))))
  for (let k = 1; k < cs.length; k++) {
    const next = cs[k] ?? ""
    const options = [
      ...(k + 1 < cs.length ? [seq(lit(next), state(k + 1))] : []),
      seq(lit(first), state(1)),
      seq(cls([[code(first), code(first)], [code(next), code(next)]], true), state(0))
    ]
    rules.fill(state(k), opt(alt(...options)))
  }
  return state(0)
}

/** The arguments' schema as the edge validates them: a JSON object (a schema without a `type` is made one). */
export const argumentsSchema = (parameters: unknown): unknown =>
  isRecord(parameters) && parameters["type"] === undefined && parameters["$ref"] === undefined &&
    parameters["anyOf"] === undefined && parameters["oneOf"] === undefined && parameters["allOf"] === undefined
    ? { ...parameters, type: "object" }
    : parameters

const argumentsRule = (
  rules: RuleSet,
  parameters: unknown,
  name: string,
  prefix: string,
  unconstrained: Array<string>
): string => {
  // No parameters: any object, as validation accepts.
  if (parameters === undefined) return anyObject({ rules, inMarkup: true })
  const compiled = compileInto(rules, argumentsSchema(parameters), `args-${name}`, prefix, true)
  unconstrained.push(...compiled.unconstrained)
  return compiled.rule
}

/**
 * The answer's grammar from the request's tools, `tool_choice` and `parallel_tool_calls`: `auto` is free text
 * (never holding `<tool_call>`) then optionally the calls; `required` and a named tool are the calls at once (a
 * named tool's only); `none` is no grammar. `parallel_tool_calls: false` is exactly one call, otherwise 1 to
 * `MAX_CALLS`. Inside a call, strings write `<` only as `\u003c`, so that no `<tool_call>` or `</tool_call>` (or
 * any other family's tag) can appear inside a value and split the call where the edge's parser looks for the close
 * tag. Unconstrained parts are reported as `/tools/<i>/function/parameters/…`.
 */
export const toolCallGrammar = (request: ToolCallGrammarRequest, limits: GrammarLimits = DEFAULT_LIMITS): ToolCallGrammar => {
  const choice = request.toolChoice ?? "auto"
  if (choice === "none") return noGrammar("ToolChoiceNone")
  if (request.tools.length === 0) return noGrammar("NoTools")
  const indexed = request.tools.map((tool, i) => ({ tool, i }))
  const chosen = typeof choice === "object" ? indexed.filter(({ tool }) => tool.function.name === choice.function.name) : indexed
  if (chosen.length === 0) return noGrammar("UnknownTool")
  const rules = makeRuleSet()
  const root = rules.reserve("root")
  const unconstrained: Array<string> = []
  // One rule per tool name (a name twice in the request: the first one's schema, as validation finds it).
  const seen = new Set<string>()
  const calls = chosen.flatMap(({ tool, i }) => {
    const name = tool.function.name
    if (seen.has(name)) return []
    seen.add(name)
    const args = argumentsRule(rules, tool.function.parameters, name, `/tools/${i}/function/parameters`, unconstrained)
    const open = `${OPEN_TAG}\n{"name": ${markupSafe(JSON.stringify(name), true)}, "arguments": `
    return [rules.define(`call-${name}`, seq(lit(open), args, lit("}\n</tool_call>")))]
  })
  const call = rules.define("call", alt(...calls))
  const callsRule = request.parallelToolCalls === false
    ? call
    : rules.define("calls", seq(call, rules.repeat(seq(lit("\n"), call), 0, MAX_CALLS - 1)))
  if (choice === "auto") {
    const text = textWithout(rules, OPEN_TAG) ?? ""
    rules.fill(root, seq(text, opt(callsRule)))
  } else rules.fill(root, callsRule)
  return finish(rules.rules(), unconstrained, limits)
}

/**
 * The grammar of a `response_format`: `json_schema` → a value of its schema (pointers reported under
 * `/response_format/json_schema/schema`), `json_object` → any JSON object, anything else → no grammar.
 */
export const responseFormatGrammar = (responseFormat: unknown, limits: GrammarLimits = DEFAULT_LIMITS): ToolCallGrammar => {
  if (!isRecord(responseFormat)) return noGrammar("NotJsonSchema")
  const rules = makeRuleSet()
  if (responseFormat["type"] === "json_object") {
    const root = rules.reserve("root")
    rules.fill(root, anyObject({ rules, inMarkup: false }))
    return finish(rules.rules(), [], limits)
  }
  const spec = responseFormat["json_schema"]
  if (responseFormat["type"] !== "json_schema" || !isRecord(spec) || spec["schema"] === undefined) {
    return noGrammar("NotJsonSchema")
  }
  return jsonSchemaGrammar(spec["schema"], limits, "/response_format/json_schema/schema")
}
