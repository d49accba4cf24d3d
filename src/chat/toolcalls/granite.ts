/**
 * Granite 3.x: `<|tool_call|>[{"name": ..., "arguments": {...}}, ...]` (the block ends where the JSON closes). A
 * body that does not start with JSON runs to the end of the response and is malformed. Granite 4 writes
 * `<tool_call>` (the xml format).
 */
import { isWhitespace, malformed, type ScannedFormat } from "./block.js"
import { parseJsonCalls } from "./json.js"
import { JSON_OPENED, jsonClosed, jsonStep } from "./jsonScan.js"

const WHERE = "<|tool_call|>"

// Scan states: before the JSON, not JSON (runs to the end), IN_JSON + s: in the JSON, jsonScan state s.
const LEAD = 0
const REST = 1
const IN_JSON = 4

const step = (s: number, c: number): number => {
  if (s >= IN_JSON) return IN_JSON + jsonStep(s - IN_JSON, c)
  if (s === REST) return REST
  if (isWhitespace(c)) return LEAD
  return c === 0x5b || c === 0x7b ? IN_JSON + JSON_OPENED : REST
}

export const granite: ScannedFormat = {
  format: "granite",
  open: "<|tool_call|>",
  committed: "<|tool_call|".length,
  start: LEAD,
  step,
  done: (s) => s >= IN_JSON && jsonClosed(s - IN_JSON),
  parse: (body, complete) =>
    complete ? parseJsonCalls(body, WHERE) : malformed(`${WHERE}: no complete JSON before the end of the response`)
}
