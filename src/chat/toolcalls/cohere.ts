/**
 * Cohere Command R7B / Command A: `<|START_ACTION|>[{"tool_call_id": "0", "tool_name": ..., "parameters": {...}},
 * ...]<|END_ACTION|>`. `name` / `arguments` are read too.
 */
import { type TagFormat, tagFormat } from "./block.js"
import { keyedCall, parseJsonBody } from "./jsonBlocks.js"

const WHERE = "<|START_ACTION|>"

export const cohere: TagFormat = tagFormat({
  format: "cohere",
  open: "<|START_ACTION|>",
  close: "<|END_ACTION|>",
  parse: (body) =>
    parseJsonBody(body, WHERE, (value) => keyedCall(value, WHERE, ["tool_name", "name"], ["parameters", "arguments"]))
})
