/**
 * Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}
 * <|tool_call_end|>...<|tool_calls_section_end|>`. The call's id is `functions.NAME:INDEX`; its name is NAME.
 */
import { clip } from "../../common/clip.js"
import { indexOfCi, malformed, type TagFormat } from "./block.js"
import { argumentsText, REASON_PART_CHARS } from "./json.js"
import { callsOf, callSegments, jsonValue } from "./jsonBlocks.js"
import type { ParsedToolCall } from "./types.js"

const OPEN = "<|tool_calls_section_begin|>"
const CALL_BEGIN = "<|tool_call_begin|>"
const CALL_END = "<|tool_call_end|>"
const ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
const PREFIX = "functions."

/** `functions.NAME:INDEX` → NAME (an id without the prefix or the index is the name as it is). */
export const kimiToolName = (id: string): string => {
  const withoutPrefix = id.startsWith(PREFIX) ? id.slice(PREFIX.length) : id
  return withoutPrefix.replace(/:\d+$/, "").trim()
}

const kimiCall = (segment: unknown): ParsedToolCall | string => {
  const text = typeof segment === "string" ? segment : ""
  const at = indexOfCi(text, ARGUMENT_BEGIN, 0)
  if (at < 0) return `${CALL_BEGIN}: no ${ARGUMENT_BEGIN}`
  const name = kimiToolName(text.slice(0, at).trim())
  if (name === "") return `${CALL_BEGIN}: no tool name`
  const where = `${CALL_BEGIN}${clip(name, REASON_PART_CHARS)}`
  const argsText = text.slice(at + ARGUMENT_BEGIN.length).trim()
  if (argsText === "") return { name, arguments: "{}" }
  const parsed = jsonValue(argsText, where)
  if (!parsed.ok) return parsed.reason
  const args = argumentsText(parsed.value)
  return args === undefined ? `${where}: arguments are not a JSON object` : { name, arguments: args }
}

export const kimiK2: TagFormat = {
  format: "kimi_k2",
  open: OPEN,
  close: "<|tool_calls_section_end|>",
  committed: OPEN.length - 1,
  claims: () => true,
  parse: (body) => {
    const segments = callSegments(body, CALL_BEGIN, CALL_END)
    return segments.length === 0 ? malformed(`${OPEN}: no ${CALL_BEGIN}`) : callsOf(segments, OPEN, kimiCall)
  }
}
