/** JSON helpers shared by the text formats: parsing without exceptions, and a call object to a ParsedToolCall. */
import { clip } from "../../common/clip.js"
import { type BlockResult, calls, malformed } from "./block.js"
import type { ParsedToolCall, RequestTool } from "./types.js"

/** A part of a parser's reason taken from the response (a tool name, a parser's message) is clipped to this. */
export const REASON_PART_CHARS = 64

export type JsonResult = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: string }

export const parseJson = (text: string): JsonResult => {
  try {
    return { ok: true, value: JSON.parse(text) as unknown }
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : String(e) }
  }
}

export const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Arguments as JSON text of an object: an object as is, a JSON string holding an object decoded once, missing or
 * blank as `{}`. Anything else is not arguments (undefined).
 */
export const argumentsText = (value: unknown): string | undefined => {
  if (value === undefined || value === null) return "{}"
  if (isRecord(value)) return JSON.stringify(value)
  if (typeof value !== "string") return undefined
  if (value.trim() === "") return "{}"
  const inner = parseJson(value)
  return inner.ok && isRecord(inner.value) ? JSON.stringify(inner.value) : undefined
}

/** `{"name": ..., "arguments": ...}` (or `parameters`) as a call, else the reason it is not one. */
export const callFromValue = (value: unknown, where: string): ParsedToolCall | string => {
  if (!isRecord(value)) return `${where}: not a JSON object`
  const name = value["name"]
  if (typeof name !== "string" || name.trim() === "") return `${where}: no tool name`
  const args = argumentsText("arguments" in value ? value["arguments"] : value["parameters"])
  if (args === undefined) return `${where}: arguments of "${clip(name, REASON_PART_CHARS)}" are not a JSON object`
  return { name: name.trim(), arguments: args }
}

/** A block body holding one call object or an array of them. */
export const parseJsonCalls = (body: string, where: string): BlockResult => {
  const text = stripFence(body.trim())
  if (text === "") return malformed(`${where}: empty`)
  const parsed = parseJson(text)
  if (!parsed.ok) return malformed(`${where}: invalid JSON (${clip(parsed.error, REASON_PART_CHARS * 2)})`)
  const values = Array.isArray(parsed.value) ? parsed.value : [parsed.value]
  if (values.length === 0) return malformed(`${where}: no calls`)
  const out: Array<ParsedToolCall> = []
  for (const value of values) {
    const call = callFromValue(value, where)
    if (typeof call === "string") return malformed(call)
    out.push(call)
  }
  return calls(out)
}

// Some models wrap the JSON in a Markdown fence inside the tag.
const stripFence = (text: string): string => {
  if (!text.startsWith("```") || !text.endsWith("```") || text.length < 6) return text
  const firstLine = text.indexOf("\n")
  return firstLine < 0 ? text : text.slice(firstLine + 1, -3).trim()
}

/** The request tool called `name`: exact match first, then case-insensitive. */
export const findTool = (tools: ReadonlyArray<RequestTool>, name: string): RequestTool | undefined => {
  const exact = tools.find((t) => t.name === name)
  if (exact !== undefined) return exact
  const lower = name.toLowerCase()
  return tools.find((t) => t.name.toLowerCase() === lower)
}
