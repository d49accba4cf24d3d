/**
 * Mistral: `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` (the block ends where the JSON array closes), or
 * the v11 form `[TOOL_CALLS]name[ARGS]{...}` (ends where the object closes). A body that fits neither runs to the
 * end of the stream and is malformed.
 */
import { clip } from "../../common/clip.js"
import { calls, indexOfCi, isWhitespace, lowerCode, malformed, type ScannedFormat } from "./block.js"
import { argumentsText, parseJson, parseJsonCalls, REASON_PART_CHARS } from "./json.js"
import { JSON_OPENED, jsonClosed, jsonStep } from "./jsonScan.js"

const WHERE = "[TOOL_CALLS]"
const ARGS_TAG = "[args]"

// Scan states. ARGS + k: k chars of "[ARGS]" matched after the name; IN_JSON + s: in the JSON, jsonScan state s.
const LEAD = 0
const NAME = 1
const ARGS = 2
const ARGS_LEAD = 9
const REST = 10
const IN_JSON = 16

const isNameChar = (c: number): boolean =>
  (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f || c === 0x2d ||
  c === 0x2e || c === 0x3a

const step = (s: number, c: number): number => {
  if (s >= IN_JSON) return IN_JSON + jsonStep(s - IN_JSON, c)
  switch (s) {
    case LEAD:
      if (isWhitespace(c)) return LEAD
      if (c === 0x5b || c === 0x7b) return IN_JSON + JSON_OPENED
      return isNameChar(c) ? NAME : REST
    case NAME:
      if (isNameChar(c)) return NAME
      return c === 0x5b ? ARGS + 1 : REST
    case ARGS_LEAD:
      if (isWhitespace(c)) return ARGS_LEAD
      return c === 0x7b ? IN_JSON + JSON_OPENED : REST
    case REST:
      return REST
    default: {
      const k = s - ARGS
      if (lowerCode(c) !== ARGS_TAG.charCodeAt(k)) return REST
      return k + 1 === ARGS_TAG.length ? ARGS_LEAD : s + 1
    }
  }
}

const parse: ScannedFormat["parse"] = (body, complete) => {
  if (!complete) return malformed(`${WHERE}: no complete JSON before the end of the response`)
  const text = body.trim()
  if (text.startsWith("[") || text.startsWith("{")) return parseJsonCalls(text, WHERE)
  const at = indexOfCi(text, ARGS_TAG, 0)
  const name = text.slice(0, Math.max(0, at)).trim()
  const parsed = parseJson(text.slice(at + ARGS_TAG.length))
  const shown = clip(name, REASON_PART_CHARS)
  if (at < 0 || name === "" || !parsed.ok) return malformed(`${WHERE}${shown}[ARGS]: invalid JSON`)
  const args = argumentsText(parsed.value)
  return args === undefined
    ? malformed(`${WHERE}${shown}[ARGS]: arguments are not a JSON object`)
    : calls([{ name, arguments: args }])
}

export const mistral: ScannedFormat = {
  format: "mistral",
  open: "[TOOL_CALLS]",
  committed: "[TOOL_CALLS".length,
  start: LEAD,
  step,
  done: (s) => s >= IN_JSON && jsonClosed(s - IN_JSON),
  parse
}
