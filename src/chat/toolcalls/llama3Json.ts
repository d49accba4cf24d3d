/**
 * Llama 3.x: `<|python_tag|>{"name": ..., "parameters": {...}}`, several calls written `{...}; {...}`. The model
 * ends the message after its call (`<|eom_id|>`, usually a stop token the upstream strips), so the block runs to
 * `<|eom_id|>` when it shows, else to the end of the response. The bare `{"name", "parameters"}` form without the
 * tag is bare_json's.
 */
import { malformed, type TagFormat } from "./block.js"
import { callFromValue } from "./json.js"
import { callsOf, jsonSequence, jsonValue } from "./jsonBlocks.js"

const WHERE = "<|python_tag|>"

const parse: TagFormat["parse"] = (body) => {
  const texts = jsonSequence(body, ";")
  if (typeof texts === "string") return malformed(`${WHERE}: ${texts}`)
  if (texts.length === 0) return malformed(`${WHERE}: empty`)
  const values: Array<unknown> = []
  for (const text of texts) {
    const parsed = jsonValue(text, WHERE)
    if (!parsed.ok) return malformed(parsed.reason)
    values.push(parsed.value)
  }
  return callsOf(values, WHERE, (value) => callFromValue(value, WHERE))
}

export const llama3Json: TagFormat = {
  format: "llama3_json",
  open: "<|python_tag|>",
  close: "<|eom_id|>",
  committed: "<|python_tag|".length,
  claims: () => true,
  parse
}
