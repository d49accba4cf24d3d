/** Validation of tool calls against the request's tools, their JSON Schemas (ajv) and `tool_choice`. */
import { Ajv, type ErrorObject, type Options, type ValidateFunction } from "ajv"
import { Ajv2019 } from "ajv/dist/2019.js"
import { Ajv2020 } from "ajv/dist/2020.js"
import addFormats from "ajv-formats"
import { isRecord, parseJson } from "./json.js"
import type { ParsedToolCall, RequestTool, ToolChoiceMode } from "./types.js"

export type Verdict = { readonly _tag: "Valid" } | { readonly _tag: "Invalid"; readonly reason: string }

const valid: Verdict = { _tag: "Valid" }
const invalid = (reason: string): Verdict => ({ _tag: "Invalid", reason })

export const toolChoiceMode = (
  choice: "none" | "auto" | "required" | { readonly function: { readonly name: string } } | undefined
): ToolChoiceMode => {
  if (choice === "none") return { _tag: "None" }
  if (choice === "required") return { _tag: "Required" }
  if (choice === undefined || choice === "auto") return { _tag: "Auto" }
  return { _tag: "Function", name: choice.function.name }
}

type Draft = "2020" | "2019" | "07"
type AnyAjv = Ajv | Ajv2019 | Ajv2020

// addUsedSchema: false, so schemas of different requests that share an `$id` do not collide in the instance.
// allErrors: true checks properties one after another; false nests a block per property, which overflows the stack
// on schemas with thousands of properties.
const OPTIONS: Options = { strict: false, allErrors: true, addUsedSchema: false }
const instances = new Map<Draft, AnyAjv>()

const instance = (draft: Draft): AnyAjv => {
  const existing = instances.get(draft)
  if (existing !== undefined) return existing
  const ajv = draft === "07" ? new Ajv(OPTIONS) : draft === "2019" ? new Ajv2019(OPTIONS) : new Ajv2020(OPTIONS)
  addFormats.default(ajv)
  instances.set(draft, ajv)
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

type Compiled =
  | { readonly ok: true; readonly validate: ValidateFunction }
  | { readonly ok: false; readonly error: string }

const CACHE_SIZE = 256
const cache = new Map<string, { readonly compiled: Compiled; readonly draft: Draft; readonly schema: object }>()

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e))

const compileSchema = (parameters: Readonly<Record<string, unknown>>): Compiled => {
  const { draft, schema } = draftOf(parameters)
  let key: string
  try {
    key = `${draft}:${JSON.stringify(schema)}`
  } catch (e) {
    return { ok: false, error: message(e) }
  }
  const hit = cache.get(key)
  if (hit !== undefined) {
    cache.delete(key)
    cache.set(key, hit)
    return hit.compiled
  }
  let compiled: Compiled
  try {
    compiled = { ok: true, validate: instance(draft).compile(schema) }
  } catch (e) {
    compiled = { ok: false, error: message(e) }
  }
  cache.set(key, { compiled, draft, schema })
  if (cache.size > CACHE_SIZE) {
    const [oldest] = cache
    if (oldest !== undefined) {
      cache.delete(oldest[0])
      // ajv keeps every compiled schema object; let go of the evicted one.
      instance(oldest[1].draft).removeSchema(oldest[1].schema)
    }
  }
  return compiled
}

const describe = (error: ErrorObject): string => {
  const params: Record<string, unknown> = error.params
  const detail = error.keyword === "additionalProperties" && typeof params["additionalProperty"] === "string"
    ? ` '${params["additionalProperty"]}'`
    : error.keyword === "enum" && Array.isArray(params["allowedValues"])
    ? `: ${JSON.stringify(params["allowedValues"])}`
    : ""
  const path = error.instancePath === "" ? "/" : error.instancePath
  return `${path} ${error.message ?? "is invalid"}${detail} (${error.keyword})`
}

const validateCall = (call: ParsedToolCall, tools: ReadonlyArray<RequestTool>): Verdict => {
  const tool = tools.find((t) => t.name === call.name)
  if (tool === undefined) return invalid(`tool "${call.name}" is not one of the request's tools`)
  const args = parseJson(call.arguments)
  if (!args.ok) return invalid(`tool "${call.name}": arguments are not valid JSON (${args.error})`)
  if (!isRecord(args.value)) return invalid(`tool "${call.name}": arguments are not a JSON object`)
  if (tool.parameters === undefined) return valid
  const compiled = compileSchema(tool.parameters)
  if (!compiled.ok) return invalid(`tool "${call.name}": the tool's parameters schema is invalid: ${compiled.error}`)
  try {
    if (compiled.validate(args.value)) return valid
    const error = compiled.validate.errors?.[0]
    return invalid(`tool "${call.name}": ${error === undefined ? "arguments are invalid" : describe(error)}`)
  } catch (e) {
    // A schema whose `$ref`s loop without consuming input recurses until the stack runs out.
    return invalid(`tool "${call.name}": the tool's parameters schema is invalid: ${message(e)}`)
  }
}

export const validateToolCalls = (
  calls: ReadonlyArray<ParsedToolCall>,
  tools: ReadonlyArray<RequestTool>,
  choice: ToolChoiceMode
): Verdict => {
  const first = calls[0]
  switch (choice._tag) {
    case "None":
      if (first !== undefined) return invalid(`tool_choice is "none" but the response called tool "${first.name}"`)
      break
    case "Required":
      if (first === undefined) return invalid(`tool_choice is "required" but the response called no tool`)
      break
    case "Function": {
      if (first === undefined) {
        return invalid(`tool_choice requires tool "${choice.name}" but the response called no tool`)
      }
      const other = calls.find((c) => c.name !== choice.name)
      if (other !== undefined) {
        return invalid(`tool_choice allows only tool "${choice.name}" but the response called "${other.name}"`)
      }
      break
    }
    case "Auto":
      break
  }
  for (const call of calls) {
    const verdict = validateCall(call, tools)
    if (verdict._tag === "Invalid") return verdict
  }
  return valid
}
