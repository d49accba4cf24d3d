/**
 * ByteDance Seed-OSS: `<seed:tool_call><function=NAME><parameter=KEY>VALUE</parameter>…</function></seed:tool_call>`
 * (the Qwen3-Coder body in its own tag; one block per call in the template, several `<function=` read all the same).
 * The template writes a value as it is, with no newline around it, so it is kept as written and typed by the tool's
 * JSON Schema.
 */
import { type TagFormat, tagFormat } from "./block.js"
import { type InvokeSyntax, parseInvokes, wholeHeader } from "./invokes.js"
import { typedValue } from "./typedArgs.js"

const syntax: InvokeSyntax = {
  where: "<seed:tool_call>",
  invoke: "<function=",
  invokeEnd: "</function>",
  param: "<parameter=",
  paramEnd: "</parameter>",
  headerEnd: ">",
  callName: wholeHeader,
  paramName: wholeHeader,
  value: (raw, _header, schema) => typedValue(raw, schema)
}

export const seedOss: TagFormat = tagFormat({
  format: "seed_oss",
  open: "<seed:tool_call>",
  close: "</seed:tool_call>",
  parse: (body, closed, tools) => parseInvokes(syntax, body, closed, tools)
})
