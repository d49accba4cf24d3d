/** Hermes / Qwen2.5: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, JSON in the tag. */
import type { TagFormat } from "./block.js"
import { parseJsonCalls } from "./json.js"

export const xml: TagFormat = {
  format: "xml",
  open: "<tool_call>",
  close: "</tool_call>",
  committed: "<tool_call".length,
  claims: (body) => /^\s*[{[`]/.test(body),
  parse: (body) => parseJsonCalls(body, "<tool_call>")
}
