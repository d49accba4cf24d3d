/**
 * The formats whose calls are a pythonic call list: bare (Llama 3.2 / ToolACE: the whole response is the list) or
 * between markers of their own (Llama 4, Olmo 3, LFM2).
 */
import { type BareFormat, type TagFormat, tagFormat } from "./block.js"
import { findTool } from "./json.js"
import { parsePythonicCalls, pythonicBlock, typedCall } from "./pythonic.js"
import { PYTHONIC_OPENED, pythonicClosed, pythonicDead, pythonicStep } from "./pythonicScan.js"

/**
 * Llama 3.2 (and ToolACE) zero-shot calling, from Meta's prompt-format docs: the response is nothing but
 * `[func_name1(param=value, ...), func_name2(...)]`. Without markers it is a call only when every name is a request
 * tool, so prose such as `[see(x=1)]` stays text.
 */
export const pythonic: BareFormat = {
  format: "pythonic",
  first: 0x5b,
  start: PYTHONIC_OPENED,
  step: pythonicStep,
  done: pythonicClosed,
  dead: pythonicDead,
  parse: (text, tools) => {
    const parsed = parsePythonicCalls(text, "list")
    if (!parsed.ok) return undefined
    const out = []
    for (const call of parsed.calls) {
      const tool = findTool(tools, call.name)
      if (tool === undefined) return undefined
      out.push(typedCall(call, tools, tool.name))
    }
    return out
  }
}

/**
 * Llama 4: the same list, which the model may wrap in its `<|python_start|>` ... `<|python_end|>` tokens (Meta's
 * Llama 4 prompt-format docs; no template in the folder shows it).
 */
export const llama4Pythonic: TagFormat = {
  format: "llama4_pythonic",
  open: "<|python_start|>",
  close: "<|python_end|>",
  committed: "<|python_start".length,
  claims: () => true,
  parse: (body, _closed, tools) => pythonicBlock(body, tools, "<|python_start|>", "loose")
}

/**
 * Olmo 3: `<function_calls>name(key=<JSON value>, ...)` with one call per line `</function_calls>` (its template
 * writes values with `tojson`, so `true`/`null` and double quotes; a bracketed list is read too).
 */
export const olmo3: TagFormat = tagFormat({
  format: "olmo3",
  open: "<function_calls>",
  close: "</function_calls>",
  parse: (body, _closed, tools) => pythonicBlock(body, tools, "<function_calls>", "loose")
})

/**
 * LFM2 / LFM2.5: `<|tool_call_start|>[name(key='text', n=3, d={"a": 1}), ...]<|tool_call_end|>` (strings in single
 * quotes, dicts as JSON, other values as Python writes them).
 */
export const lfm2: TagFormat = {
  format: "lfm2",
  open: "<|tool_call_start|>",
  close: "<|tool_call_end|>",
  committed: "<|tool_call_start".length,
  claims: () => true,
  parse: (body, _closed, tools) => pythonicBlock(body, tools, "<|tool_call_start|>", "loose")
}
