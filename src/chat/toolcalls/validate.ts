/** Validation of tool calls against the request's tools, their JSON Schemas (ajv) and `tool_choice`. */
import { Ajv, type ErrorObject, type Options, type ValidateFunction } from "ajv"
import { Ajv2019 } from "ajv/dist/2019.js"
import { Ajv2020 } from "ajv/dist/2020.js"
import addFormats from "ajv-formats"
import { clip, clipJoin, excerpt } from "../../common/clip.js"
import { isRecord, parseJson } from "./json.js"
import { type LinearRegExpEngine, makeLinearRegExpEngine, type RegExpEngine } from "./linearRegExp.js"
import type { ParsedToolCall, RequestTool, ToolChoiceMode } from "./types.js"

/** `tool`: the tool whose call is to blame, when one is (see `ToolValidationFailed`). */
export type Verdict =
  | { readonly _tag: "Valid" }
  | { readonly _tag: "Invalid"; readonly reason: string; readonly tool?: string }

/**
 * A reason takes at most this many characters, whatever the request and the response hold: it is the client's
 * error message, the replay's `reason` and a log field. Each part from outside input is clipped first (see `clip`),
 * so that the parts after it (the keyword) survive.
 */
export const MAX_REASON_CHARS = 300
/** A tool name, a JSON pointer or ajv's message in a reason. */
const PART_CHARS = 64
/** The excerpt of ajv's params (`allowedValues`, …) in a reason. */
const PARAMS_CHARS = 64
/** A compiler's error (a schema ajv or RE2 rejects) in a reason. */
const COMPILE_ERROR_CHARS = 200

const valid: Verdict = { _tag: "Valid" }
const invalid = (reason: string, blamed?: string): Verdict =>
  blamed === undefined
    ? { _tag: "Invalid", reason: clip(reason, MAX_REASON_CHARS) }
    : { _tag: "Invalid", reason: clip(reason, MAX_REASON_CHARS), tool: blamed }
/** A tool name (the model's or the request's) as a reason quotes it. */
const tool = (name: string): string => `tool "${clip(name, PART_CHARS)}"`

/** `allowedTools`: the request's tools are the caller's allow-list (Responses `allowed_tools`), closed to others. */
export const toolChoiceMode = (
  choice: "none" | "auto" | "required" | { readonly function: { readonly name: string } } | undefined,
  allowedTools = false
): ToolChoiceMode => {
  if (choice === "none") return { _tag: "None" }
  if (choice === "required") return { _tag: "Required" }
  if (choice === undefined || choice === "auto") return allowedTools ? { _tag: "Auto", allowedTools: true } : { _tag: "Auto" }
  return { _tag: "Function", name: choice.function.name }
}

/** Whether the request's answer is held to a rule a reply can break whatever the model (so a replay may help). */
export const choiceBinds = (choice: ToolChoiceMode): boolean => choice._tag !== "Auto" || choice.allowedTools === true

export type Draft = "2020" | "2019" | "07"
type AnyAjv = Ajv | Ajv2019 | Ajv2020

/**
 * Bounds of one generation of compilers: a compiled validator lives in its Ajv's scope for as long as that Ajv
 * does (`removeSchema` frees the schema object, not the generated code), so compilers are replaced, with all they
 * compiled, once a generation has compiled this many schemas or this much schema JSON (UTF-16 code units).
 */
export const GENERATION_SCHEMAS = 256
export const GENERATION_SCHEMA_CHARS = 4 * 1024 * 1024

/** Validation reads at most this many bytes of arguments per response, all its calls together. */
export const MAX_VALIDATED_ARGUMENT_BYTES = 1024 * 1024

type Compiled =
  | { readonly ok: true; readonly validate: ValidateFunction }
  | { readonly ok: false; readonly error: string }

interface Generation {
  readonly id: number
  readonly regExp: LinearRegExpEngine
  readonly compilers: Map<Draft, AnyAjv>
  /** Schema JSON (with the draft) → its compiled validator, for the validators of this generation only. */
  readonly cache: Map<string, Compiled>
  compiledChars: number
}

const newGeneration = (id: number): Generation => ({
  id,
  regExp: makeLinearRegExpEngine(),
  compilers: new Map(),
  cache: new Map(),
  compiledChars: 0
})

let generation = newGeneration(1)

// addUsedSchema: false, so schemas of different requests that share an `$id` do not collide in the instance.
// allErrors: true checks properties one after another; false nests a block per property, which overflows the stack
// on schemas with thousands of properties.
const optionsFor = (g: Generation): Options => ({
  strict: false,
  allErrors: true,
  addUsedSchema: false,
  code: { regExp: g.regExp.engine }
})

const compilerFor = (g: Generation, draft: Draft): AnyAjv => {
  const existing = g.compilers.get(draft)
  if (existing !== undefined) return existing
  const options = optionsFor(g)
  const ajv = draft === "07" ? new Ajv(options) : draft === "2019" ? new Ajv2019(options) : new Ajv2020(options)
  addFormats.default(ajv)
  g.compilers.set(draft, ajv)
  return ajv
}

/** The draft to compile with; a `$schema` ajv has no meta-schema for is dropped (draft-04/06 read as draft-07). */
const draftOf = (schema: Readonly<Record<string, unknown>>): { readonly draft: Draft; readonly schema: object } => {
  const uri = schema["$schema"]
  if (typeof uri !== "string" || uri.includes("2020-12")) return { draft: "2020", schema }
  const { $schema: _, ...rest } = schema
  if (uri.includes("draft-07")) return { draft: "07", schema }
  if (uri.includes("2019-09")) return { draft: "2019", schema }
  return { draft: /draft-0[46]/.test(uri) ? "07" : "2020", schema: rest }
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e))

const compileSchema = (parameters: Readonly<Record<string, unknown>>): Compiled => {
  const { draft, schema } = draftOf(parameters)
  let key: string
  try {
    key = `${draft}:${JSON.stringify(schema)}`
  } catch (e) {
    return { ok: false, error: message(e) }
  }
  const hit = generation.cache.get(key)
  if (hit !== undefined) return hit
  if (generation.cache.size >= GENERATION_SCHEMAS || generation.compiledChars >= GENERATION_SCHEMA_CHARS) {
    generation = newGeneration(generation.id + 1)
  }
  const g = generation
  g.compiledChars += key.length
  let compiled: Compiled
  try {
    const validate = compilerFor(g, draft).compile(schema)
    const rejected = g.regExp.takeRejected()
    compiled = rejected.length === 0
      ? { ok: true, validate }
      : { ok: false, error: clipJoin(rejected, "; ", 2, COMPILE_ERROR_CHARS) }
  } catch (e) {
    g.regExp.takeRejected()
    compiled = { ok: false, error: clip(message(e), COMPILE_ERROR_CHARS) }
  }
  g.cache.set(key, compiled)
  return compiled
}

/** What the validator cache holds now (for tests and diagnostics). */
export const validatorCacheStats = (): {
  readonly generation: number
  readonly validators: number
  readonly compiledChars: number
  readonly compilers: number
} => ({
  generation: generation.id,
  validators: generation.cache.size,
  compiledChars: generation.compiledChars,
  compilers: generation.compilers.size
})

/** The regular-expression engine the current compiler of `draft` was given (tests check it is the linear one). */
export const regExpEngineOf = (draft: Draft): RegExpEngine => compilerFor(generation, draft).opts.code.regExp

/**
 * `<pointer> <ajv's message>[ <detail>] (<keyword>)`, each part clipped: the detail is the additional property, or
 * a short excerpt of the allowed values, never a whole `enum`, `const` or schema.
 */
export const describe = (error: ErrorObject): string => {
  const params: Record<string, unknown> = error.params
  const detail = error.keyword === "additionalProperties" && typeof params["additionalProperty"] === "string"
    ? ` '${clip(params["additionalProperty"], PART_CHARS)}'`
    : error.keyword === "enum" && Array.isArray(params["allowedValues"])
    ? `: ${excerpt(params["allowedValues"], PARAMS_CHARS)}`
    : ""
  const path = clip(error.instancePath === "" ? "/" : error.instancePath, PART_CHARS)
  const text = clip(error.message ?? "is invalid", PART_CHARS)
  return `${path} ${text}${detail} (${clip(error.keyword, PART_CHARS)})`
}

const validateCall = (call: ParsedToolCall, tools: ReadonlyArray<RequestTool>): Verdict => {
  const found = tools.find((t) => t.name === call.name)
  const named = tool(call.name)
  if (found === undefined) return invalid(`${named} is not one of the request's tools`)
  // From here the call is to a request tool: it is to blame.
  const blame = (reason: string) => invalid(reason, found.name)
  const args = parseJson(call.arguments)
  if (!args.ok) return blame(`${named}: arguments are not valid JSON (${clip(args.error, PART_CHARS * 2)})`)
  if (!isRecord(args.value)) return blame(`${named}: arguments are not a JSON object`)
  if (found.parameters === undefined) return valid
  const compiled = compileSchema(found.parameters)
  if (!compiled.ok) {
    return blame(`${named}: the tool's parameters schema is invalid: ${clip(compiled.error, COMPILE_ERROR_CHARS)}`)
  }
  try {
    if (compiled.validate(args.value)) return valid
    const error = compiled.validate.errors?.[0]
    return blame(`${named}: ${error === undefined ? "arguments are invalid" : describe(error)}`)
  } catch (e) {
    // A schema whose `$ref`s loop without consuming input recurses until the stack runs out.
    return blame(`${named}: the tool's parameters schema is invalid: ${clip(message(e), COMPILE_ERROR_CHARS)}`)
  }
}

/**
 * The request's `tool_choice` held against the calls: `none` no call; `required` at least one, each to a request
 * tool; a named function only that one; `allowed_tools` (Responses) each call to a request tool. Applied to every
 * request (strict or not); the schemas only to strict ones (`validateToolCalls`). A plain `auto` lets a call to an
 * undeclared tool through (strict mode refuses it).
 */
export const validateToolChoice = (
  calls: ReadonlyArray<ParsedToolCall>,
  choice: ToolChoiceMode,
  tools: ReadonlyArray<RequestTool>
): Verdict => {
  const first = calls[0]
  const undeclared = () => calls.find((c) => !tools.some((t) => t.name === c.name))
  switch (choice._tag) {
    case "None":
      if (first !== undefined) return invalid(`tool_choice is "none" but the response called ${tool(first.name)}`)
      break
    case "Required": {
      if (first === undefined) return invalid(`tool_choice is "required" but the response called no tool`)
      const other = undeclared()
      if (other !== undefined) return invalid(`tool_choice is "required" but ${tool(other.name)} is not one of the request's tools`)
      break
    }
    case "Function": {
      if (first === undefined) {
        return invalid(`tool_choice requires ${tool(choice.name)} but the response called no tool`, choice.name)
      }
      const other = calls.find((c) => c.name !== choice.name)
      if (other !== undefined) {
        return invalid(
          `tool_choice allows only ${tool(choice.name)} but the response called "${clip(other.name, PART_CHARS)}"`,
          choice.name
        )
      }
      break
    }
    case "Auto": {
      const other = choice.allowedTools === true ? undeclared() : undefined
      if (other !== undefined) return invalid(`allowed_tools does not allow ${tool(other.name)}`)
      break
    }
  }
  return valid
}

export const validateToolCalls = (
  calls: ReadonlyArray<ParsedToolCall>,
  tools: ReadonlyArray<RequestTool>,
  choice: ToolChoiceMode
): Verdict => {
  const chosen = validateToolChoice(calls, choice, tools)
  if (chosen._tag === "Invalid") return chosen
  let bytes = 0
  for (const call of calls) bytes += Buffer.byteLength(call.arguments, "utf8")
  if (bytes > MAX_VALIDATED_ARGUMENT_BYTES) {
    return invalid(
      `the tool calls' arguments (${bytes} bytes) exceed the ${MAX_VALIDATED_ARGUMENT_BYTES} bytes validated`,
      choice._tag === "Function" ? choice.name : undefined
    )
  }
  for (const call of calls) {
    const verdict = validateCall(call, tools)
    if (verdict._tag === "Invalid") return verdict
  }
  return valid
}
