/**
 * Arguments written as text (XML parameters, pythonic keywords, DSL values) typed by the tool's JSON Schema: a value
 * is parsed as the type its property declares, a string property keeps the text as written, and a value that cannot
 * be read as its declared type stays a string (strict mode then rejects it).
 */
import { findTool, isRecord, parseJson } from "./json.js"
import type { RequestTool } from "./types.js"

const schemaTypes = (schema: unknown): ReadonlyArray<string> => {
  if (!isRecord(schema)) return []
  const type = schema["type"]
  if (typeof type === "string") return [type]
  if (Array.isArray(type)) return type.filter((t): t is string => typeof t === "string")
  // An untyped enum or const of strings is a string.
  const choices = Array.isArray(schema["enum"]) ? schema["enum"] : "const" in schema ? [schema["const"]] : []
  return choices.length > 0 && choices.every((c) => typeof c === "string") ? ["string"] : []
}

const asType = (raw: string, type: string): { readonly value: unknown } | undefined => {
  const text = raw.trim()
  switch (type) {
    case "number":
    case "integer": {
      const n = Number(text)
      return text !== "" && Number.isFinite(n) ? { value: n } : undefined
    }
    case "boolean": {
      const lower = text.toLowerCase()
      return lower === "true" ? { value: true } : lower === "false" ? { value: false } : undefined
    }
    case "object":
    case "array": {
      const parsed = parseJson(text)
      const fits = parsed.ok && (type === "array" ? Array.isArray(parsed.value) : isRecord(parsed.value))
      return parsed.ok && fits ? { value: parsed.value } : undefined
    }
    case "null":
      return text === "null" ? { value: null } : undefined
    default:
      return undefined
  }
}

/** A parameter's value by its schema type; a string parameter stays as written, anything unknown is JSON or text. */
export const typedValue = (raw: string, schema: unknown): unknown => {
  const types = schemaTypes(schema)
  if (types.includes("string")) return raw
  for (const type of types) {
    const typed = asType(raw, type)
    if (typed !== undefined) return typed.value
  }
  const parsed = parseJson(raw.trim())
  return parsed.ok ? parsed.value : raw
}

/** The `properties` of the schema of the request tool called `name` (none when it has none or is not declared). */
export const toolProperties = (tools: ReadonlyArray<RequestTool>, name: string): Readonly<Record<string, unknown>> => {
  const props = findTool(tools, name)?.parameters?.["properties"]
  return isRecord(props) ? props : {}
}

/** Text-valued arguments of a call to `name`, each typed by its property's schema, as JSON text. */
export const typedArguments = (
  tools: ReadonlyArray<RequestTool>,
  name: string,
  entries: ReadonlyArray<readonly [string, string]>
): string => {
  const props = toolProperties(tools, name)
  const args: Record<string, unknown> = {}
  for (const [key, raw] of entries) args[key] = typedValue(raw, props[key])
  return JSON.stringify(args)
}
