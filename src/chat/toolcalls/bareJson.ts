/** A response that is nothing but `{"name": <a request tool>, "arguments": {...}}`. */
import { type BareFormat, isWhitespace } from "./block.js"
import { argumentsText, findTool, isRecord, parseJson } from "./json.js"
import { JSON_OPENED, jsonClosed, jsonStep } from "./jsonScan.js"
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

// Scan states: before the first key (only whitespace, `"` or `}` may come), dead, closed; any other state is the
// jsonScan state inside the object (≥ JSON_OPENED while it is open).
const KEY = 1
const DEAD = -1
const CLOSED = 0

const step = (s: number, c: number): number => {
  if (s === KEY) {
    // `{x} is a set` dies at `x`: prose that starts with `{` is released at once.
    if (c !== 0x22 && c !== 0x7d) return isWhitespace(c) ? KEY : DEAD
    const t = jsonStep(JSON_OPENED, c)
    return jsonClosed(t) ? CLOSED : t
  }
  if (s === CLOSED || s === DEAD) return isWhitespace(c) && s === CLOSED ? CLOSED : DEAD
  const t = jsonStep(s, c)
  return jsonClosed(t) ? CLOSED : t
}

export const bareJson: BareFormat = {
  format: "bare_json",
  first: 0x7b,
  start: KEY,
  step,
  done: (s) => s === CLOSED,
  dead: (s) => s === DEAD,
  parse: (text, tools) => {
    const call = parseBareJson(text, tools)
    return call === undefined ? undefined : [call]
  }
}
