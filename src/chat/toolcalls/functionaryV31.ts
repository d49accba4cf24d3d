/**
 * Functionary v3.1 (Llama 3.1 based): `<function=NAME>{...arguments}</function>`, one call per block, calls written
 * back to back. A block in Qwen3-Coder's parameter form (`<function=NAME><parameter=KEY>...`), which Qwen3-Coder
 * and Nemotron 3 write when they leave out `<tool_call>`, is read as qwen3_xml reads it.
 */
import { clip } from "../../common/clip.js"
import { calls, indexOfCi, malformed, type TagFormat } from "./block.js"
import { argumentsText, REASON_PART_CHARS } from "./json.js"
import { jsonValue, stripFence } from "./jsonBlocks.js"
import { qwen3Xml } from "./qwen3Xml.js"

const OPEN = "<function="
const CLOSE = "</function>"

const parse: TagFormat["parse"] = (body, closed, tools) => {
  const nameEnd = body.indexOf(">")
  if (nameEnd < 0) return malformed(`${OPEN}: unterminated open tag`)
  const name = body.slice(0, nameEnd).trim()
  if (name === "") return malformed(`${OPEN}: no tool name`)
  const where = `${OPEN}${clip(name, REASON_PART_CHARS)}>`
  const rest = stripFence(body.slice(nameEnd + 1).trim())
  if (indexOfCi(rest, "<parameter=", 0) === 0) return qwen3Xml.parse(OPEN + body + (closed ? CLOSE : ""), closed, tools)
  if (rest === "") return calls([{ name, arguments: "{}" }])
  const parsed = jsonValue(rest, where)
  if (!parsed.ok) return malformed(parsed.reason)
  const args = argumentsText(parsed.value)
  if (args === undefined) return malformed(`${where}: arguments are not a JSON object`)
  return calls([{ name, arguments: args }])
}

export const functionaryV31: TagFormat = {
  format: "functionary_v31",
  open: OPEN,
  close: CLOSE,
  // `<function=` cut off at the very end of a response stays text: it is ordinary in prose about code.
  committed: OPEN.length,
  claims: () => true,
  parse
}
