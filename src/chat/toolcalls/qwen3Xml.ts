/**
 * Qwen3-Coder: `<tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function></tool_call>`. Values are
 * plain text, typed by the tool's JSON Schema property.
 */
import { clip } from "../../common/clip.js"
import { calls, indexOfCi, malformed, type TagFormat } from "./block.js"
import { findTool, isRecord, parseJson, REASON_PART_CHARS } from "./json.js"
import type { RequestTool } from "./types.js"

const FUNCTION = "<function="
const FUNCTION_END = "</function>"
const PARAMETER = "<parameter="
const PARAMETER_END = "</parameter>"
const WHERE = "<tool_call><function=...>"

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

// The template puts each value on its own line.
const trimOneNewline = (value: string): string => {
  const start = value.startsWith("\r\n") ? 2 : value.startsWith("\n") ? 1 : 0
  const end = value.endsWith("\r\n") ? 2 : value.endsWith("\n") ? 1 : 0
  return value.length - start - end <= 0 ? "" : value.slice(start, value.length - end)
}

const properties = (tools: ReadonlyArray<RequestTool>, name: string): Readonly<Record<string, unknown>> => {
  const props = findTool(tools, name)?.parameters?.["properties"]
  return isRecord(props) ? props : {}
}

const parse: TagFormat["parse"] = (body, closed, tools) => {
  const fn = indexOfCi(body, FUNCTION, 0)
  if (fn < 0) return malformed(`${WHERE}: no <function=NAME>`)
  const nameEnd = body.indexOf(">", fn)
  if (nameEnd < 0) return malformed(`${WHERE}: unterminated <function=`)
  const name = body.slice(fn + FUNCTION.length, nameEnd).trim()
  if (name === "") return malformed(`${WHERE}: no tool name`)
  const fnEnd = indexOfCi(body, FUNCTION_END, nameEnd)
  // Without its close tag the block must at least have finished its function.
  if (fnEnd < 0 && !closed) return malformed(`${WHERE}: unterminated <function=${clip(name, REASON_PART_CHARS)}>`)
  const end = fnEnd < 0 ? body.length : fnEnd
  const props = properties(tools, name)
  const args: Record<string, unknown> = {}
  let pos = nameEnd + 1
  for (;;) {
    const param = indexOfCi(body, PARAMETER, pos)
    if (param < 0 || param >= end) break
    const keyEnd = body.indexOf(">", param)
    if (keyEnd < 0 || keyEnd >= end) return malformed(`${WHERE}: unterminated <parameter=`)
    const key = body.slice(param + PARAMETER.length, keyEnd).trim()
    if (key === "") return malformed(`${WHERE}: a parameter has no name`)
    const close = indexOfCi(body, PARAMETER_END, keyEnd)
    const next = indexOfCi(body, PARAMETER, keyEnd)
    // A missing </parameter> ends the value at the next parameter or at </function>.
    const closedHere = close >= 0 && close < end && (next < 0 || close < next)
    const valueEnd = closedHere ? close : next >= 0 && next < end ? next : end
    args[key] = typedValue(trimOneNewline(body.slice(keyEnd + 1, valueEnd)), props[key])
    pos = closedHere ? close + PARAMETER_END.length : valueEnd
  }
  return calls([{ name, arguments: JSON.stringify(args) }])
}

export const qwen3Xml: TagFormat = {
  format: "qwen3_xml",
  open: "<tool_call>",
  close: "</tool_call>",
  committed: "<tool_call".length,
  claims: (body) => indexOfCi(body.trimStart(), FUNCTION, 0) === 0,
  parse
}
