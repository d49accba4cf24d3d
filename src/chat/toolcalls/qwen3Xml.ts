/**
 * Qwen3-Coder: `<tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function></tool_call>`. Values are
 * plain text, typed by the tool's JSON Schema property.
 */
import { clip } from "../../common/clip.js"
import { calls, indexOfCi, malformed, type TagFormat } from "./block.js"
import { REASON_PART_CHARS } from "./json.js"
import { toolProperties, typedValue } from "./typedArgs.js"

const FUNCTION = "<function="
const FUNCTION_END = "</function>"
const PARAMETER = "<parameter="
const PARAMETER_END = "</parameter>"
const WHERE = "<tool_call><function=...>"

// The template puts each value on its own line.
const trimOneNewline = (value: string): string => {
  const start = value.startsWith("\r\n") ? 2 : value.startsWith("\n") ? 1 : 0
  const end = value.endsWith("\r\n") ? 2 : value.endsWith("\n") ? 1 : 0
  return value.length - start - end <= 0 ? "" : value.slice(start, value.length - end)
}

const parse: TagFormat["parse"] = (body, closed, tools) => {
  const fn = indexOfCi(body, FUNCTION, 0)
  if (fn < 0) return malformed(`${WHERE}: no <function=NAME>`)
  const nameEnd = body.indexOf(">", fn)
  if (nameEnd < 0) return malformed(`${WHERE}: unterminated <function=`)
  const name = body.slice(fn + FUNCTION.length, nameEnd).trim()
  if (name === "") return malformed(`${WHERE}: no tool name`)
  const fnEnd = indexOfCi(body, FUNCTION_END, nameEnd)
  // Without its close tag the block must at least have finished its function.
  if (fnEnd < 0 && !closed) return malformed(`${WHERE}: unterminated <function=${clip(name, REASON_PART_CHARS)}>`)
  const end = fnEnd < 0 ? body.length : fnEnd
  const props = toolProperties(tools, name)
  const args: Record<string, unknown> = {}
  let pos = nameEnd + 1
  for (;;) {
    const param = indexOfCi(body, PARAMETER, pos)
    if (param < 0 || param >= end) break
    const keyEnd = body.indexOf(">", param)
    if (keyEnd < 0 || keyEnd >= end) return malformed(`${WHERE}: unterminated <parameter=`)
    const key = body.slice(param + PARAMETER.length, keyEnd).trim()
    if (key === "") return malformed(`${WHERE}: a parameter has no name`)
    const close = indexOfCi(body, PARAMETER_END, keyEnd)
    const next = indexOfCi(body, PARAMETER, keyEnd)
    // A missing </parameter> ends the value at the next parameter or at </function>.
    const closedHere = close >= 0 && close < end && (next < 0 || close < next)
    const valueEnd = closedHere ? close : next >= 0 && next < end ? next : end
    args[key] = typedValue(trimOneNewline(body.slice(keyEnd + 1, valueEnd)), props[key])
    pos = closedHere ? close + PARAMETER_END.length : valueEnd
  }
  return calls([{ name, arguments: JSON.stringify(args) }])
}

export const qwen3Xml: TagFormat = {
  format: "qwen3_xml",
  open: "<tool_call>",
  close: "</tool_call>",
  committed: "<tool_call".length,
  claims: (body) => indexOfCi(body.trimStart(), FUNCTION, 0) === 0,
  parse
}
