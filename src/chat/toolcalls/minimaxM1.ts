/**
 * MiniMax-M1 (`MiniMax-M1.jinja`): `<tool_calls>\n{"name": "f", "arguments": {...}}\n...\n</tool_calls>`, one JSON
 * call per line; Apriel 1.5/1.6 write the same tags around one JSON list of calls.
 */
import { calls, malformed, type TagFormat, tagFormat } from "./block.js"
import { callFromValue, parseJson, parseJsonCalls } from "./json.js"
import type { ParsedToolCall } from "./types.js"

const WHERE = "<tool_calls>"

export const minimaxM1: TagFormat = tagFormat({
  format: "minimax_m1",
  open: "<tool_calls>",
  close: "</tool_calls>",
  parse: (body) => {
    const whole = parseJsonCalls(body, WHERE)
    if (whole._tag === "Calls") return whole
    const out: Array<ParsedToolCall> = []
    for (const line of body.split("\n")) {
      const text = line.trim()
      if (text === "") continue
      const parsed = parseJson(text)
      if (!parsed.ok) return malformed(`${WHERE}: a line is not JSON`)
      const call = callFromValue(parsed.value, WHERE)
      if (typeof call === "string") return malformed(call)
      out.push(call)
    }
    return out.length === 0 ? malformed(`${WHERE}: no calls`) : calls(out)
  }
})
