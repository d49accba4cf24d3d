/** The xml completion tool: a strict answer that called no tool, wrapped into a call of a request tool. */
import { findTool, isRecord } from "./json.js"
import type { ParsedToolCall, RequestTool } from "./types.js"

const isStringSchema = (schema: unknown): boolean => {
  if (!isRecord(schema)) return false
  const type = schema["type"]
  return type === "string" || (Array.isArray(type) && type.includes("string"))
}

/** The parameter the text goes into: the one required string parameter, else `result`. */
const textParameter = (tool: RequestTool): string => {
  const required = tool.parameters?.["required"]
  const properties = tool.parameters?.["properties"]
  if (!Array.isArray(required) || !isRecord(properties)) return "result"
  const strings = required.filter((key): key is string => typeof key === "string" && isStringSchema(properties[key]))
  return strings.length === 1 && strings[0] !== undefined ? strings[0] : "result"
}

export const wrapAsCompletionTool = (
  text: string,
  toolName: string,
  tools: ReadonlyArray<RequestTool>
): ParsedToolCall | undefined => {
  const tool = findTool(tools, toolName)
  if (tool === undefined) return undefined
  return { name: tool.name, arguments: JSON.stringify({ [textParameter(tool)]: text }) }
}
