/** Native tool calls from the provider, normalised against the request's tools. */
import { findTool, isRecord, parseJson } from "./json.js"
import type { RequestTool, ToolCall } from "./types.js"

const ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

/** `call_` and 24 chars of [A-Za-z0-9]; `random` returns [0, 1). */
export const newToolCallId = (random: () => number): string => {
  let id = "call_"
  for (let i = 0; i < 24; i++) {
    const k = Math.min(ID_CHARS.length - 1, Math.max(0, Math.floor(random() * ID_CHARS.length)))
    id += ID_CHARS.charAt(k)
  }
  return id
}

/**
 * Arguments as JSON text: blank becomes `{}`, and a JSON string holding an object (double-encoded by some providers)
 * is decoded once. Anything else is kept as sent, for validation to judge.
 */
const normaliseArguments = (args: string): string => {
  if (args.trim() === "") return "{}"
  const parsed = parseJson(args)
  if (!parsed.ok || typeof parsed.value !== "string") return args
  const inner = parseJson(parsed.value)
  return inner.ok && isRecord(inner.value) ? JSON.stringify(inner.value) : args
}

export const normaliseToolCalls = (
  calls: ReadonlyArray<{ readonly id?: string | undefined; readonly name: string; readonly arguments: string }>,
  tools: ReadonlyArray<RequestTool>,
  newId: () => string
): ReadonlyArray<ToolCall> =>
  calls.map((call) => ({
    id: call.id !== undefined && call.id.trim() !== "" ? call.id : newId(),
    name: findTool(tools, call.name.trim())?.name ?? call.name,
    arguments: normaliseArguments(call.arguments)
  }))
