/** A response that is nothing but `{"name": <a request tool>, "arguments": {...}}`. */
import { argumentsText, findTool, isRecord, parseJson } from "./json.js"
import type { ParsedToolCall, RequestTool } from "./types.js"

/**
 * The call the whole text is, else undefined (then the text is plain text). Only a request tool's name counts, and
 * `arguments` (or `parameters`) must be present: a bare object is too easily an ordinary JSON answer.
 */
export const parseBareJson = (text: string, tools: ReadonlyArray<RequestTool>): ParsedToolCall | undefined => {
  const trimmed = text.trim()
  if (!trimmed.startsWith("{")) return undefined
  const parsed = parseJson(trimmed)
  if (!parsed.ok || !isRecord(parsed.value)) return undefined
  const value = parsed.value
  const name = value["name"]
  if (typeof name !== "string") return undefined
  const tool = findTool(tools, name.trim())
  if (tool === undefined || !("arguments" in value || "parameters" in value)) return undefined
  const args = argumentsText("arguments" in value ? value["arguments"] : value["parameters"])
  return args === undefined ? undefined : { name: tool.name, arguments: args }
}
