/**
 * Apertus: `<|tools_prefix|>[{"NAME": {...arguments}}, ...]<|tools_suffix|>`: each call is an object whose one
 * key is the tool's name. An object of the usual `{"name": ..., "arguments": ...}` shape is read as that.
 */
import { clip } from "../../common/clip.js"
import { type TagFormat, tagFormat } from "./block.js"
import { argumentsText, callFromValue, isRecord, REASON_PART_CHARS } from "./json.js"
import { parseJsonBody } from "./jsonBlocks.js"
import type { ParsedToolCall } from "./types.js"

const WHERE = "<|tools_prefix|>"

const apertusCall = (value: unknown): ParsedToolCall | string => {
  if (!isRecord(value)) return `${WHERE}: not a JSON object`
  const keys = Object.keys(value)
  const [name] = keys
  if (keys.length !== 1 || name === undefined || typeof value["name"] === "string") return callFromValue(value, WHERE)
  if (name.trim() === "") return `${WHERE}: no tool name`
  const args = argumentsText(value[name])
  if (args === undefined) return `${WHERE}: arguments of "${clip(name, REASON_PART_CHARS)}" are not a JSON object`
  return { name: name.trim(), arguments: args }
}

export const apertus: TagFormat = tagFormat({
  format: "apertus",
  open: "<|tools_prefix|>",
  close: "<|tools_suffix|>",
  parse: (body) => parseJsonBody(body, WHERE, apertusCall)
})
