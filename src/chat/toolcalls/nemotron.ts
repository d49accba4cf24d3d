/**
 * NVIDIA Nemotron Nano v2: `<TOOLCALL>[{"name": ..., "arguments": {...}}, ...]</TOOLCALL>`. Nemotron 3 Nano writes
 * Qwen3-Coder's `<tool_call><function=...>` (the qwen3_xml format).
 */
import { type TagFormat, tagFormat } from "./block.js"
import { parseJsonCalls } from "./json.js"

export const nemotron: TagFormat = tagFormat({
  format: "nemotron",
  open: "<TOOLCALL>",
  close: "</TOOLCALL>",
  parse: (body) => parseJsonCalls(body, "<TOOLCALL>")
})
