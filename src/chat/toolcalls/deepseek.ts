/**
 * DeepSeek V3 / R1 and V3.1, one block of calls between `<｜tool▁calls▁begin｜>` and `<｜tool▁calls▁end｜>`
 * (fullwidth bars, `▁` for spaces), each call `<｜tool▁call▁begin｜>...<｜tool▁call▁end｜>`:
 * - V3 / R1: `function<｜tool▁sep｜>NAME\n```json\n{...}\n```` (the call's type, then its name and fenced JSON);
 * - V3.1: `NAME<｜tool▁sep｜>{...}`.
 * A call whose text after the separator starts as JSON is V3.1's; otherwise its first line is the name.
 */
import { clip } from "../../common/clip.js"
import { indexOfCi, malformed, type TagFormat } from "./block.js"
import { argumentsText, REASON_PART_CHARS } from "./json.js"
import { callsOf, callSegments, jsonValue, stripFence } from "./jsonBlocks.js"
import type { ParsedToolCall } from "./types.js"

const OPEN = "<｜tool▁calls▁begin｜>"
const CALL_BEGIN = "<｜tool▁call▁begin｜>"
const CALL_END = "<｜tool▁call▁end｜>"
const SEP = "<｜tool▁sep｜>"

/** V3's name runs to the end of its line, or to where its JSON or fence starts. */
const nameEnd = (text: string): number => {
  const ends = [text.indexOf("\n"), text.indexOf("`"), text.indexOf("{")].filter((i) => i >= 0)
  return ends.length === 0 ? text.length : Math.min(...ends)
}

const deepseekCall = (segment: unknown): ParsedToolCall | string => {
  const text = typeof segment === "string" ? segment : ""
  const sep = indexOfCi(text, SEP, 0)
  if (sep < 0) return `${CALL_BEGIN}: no ${SEP}`
  const head = text.slice(0, sep).trim()
  const tail = text.slice(sep + SEP.length).trim()
  const v31 = tail === "" || tail.startsWith("{") || tail.startsWith("\"")
  const end = v31 ? 0 : nameEnd(tail)
  const name = v31 ? head : tail.slice(0, end).trim()
  if (name === "") return `${CALL_BEGIN}: no tool name`
  const where = `${CALL_BEGIN}${clip(name, REASON_PART_CHARS)}`
  const argsText = v31 ? tail : stripFence(tail.slice(end).trim())
  if (argsText === "") return { name, arguments: "{}" }
  const parsed = jsonValue(argsText, where)
  if (!parsed.ok) return parsed.reason
  // V3.1's template writes the arguments string through `tojson`: a JSON string holding the object is read too.
  const args = argumentsText(parsed.value)
  return args === undefined ? `${where}: arguments are not a JSON object` : { name, arguments: args }
}

export const deepseekV3: TagFormat = {
  format: "deepseek_v3",
  open: OPEN,
  close: "<｜tool▁calls▁end｜>",
  committed: OPEN.length - 1,
  claims: () => true,
  parse: (body) => {
    const segments = callSegments(body, CALL_BEGIN, CALL_END)
    return segments.length === 0 ? malformed(`${OPEN}: no ${CALL_BEGIN}`) : callsOf(segments, OPEN, deepseekCall)
  }
}
