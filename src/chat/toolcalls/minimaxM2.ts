/**
 * MiniMax-M2: `<minimax:tool_call>` holding one `<invoke name="NAME">` per call, each with
 * `<parameter name="KEY">VALUE</parameter>` per argument. The template writes a string as it is and anything else as
 * JSON, unescaped, so values are typed by the tool's JSON Schema.
 */
import { type TagFormat, tagFormat } from "./block.js"
import { attribute, type InvokeSyntax, parseInvokes } from "./invokes.js"
import { typedValue } from "./typedArgs.js"

const syntax: InvokeSyntax = {
  where: "<minimax:tool_call>",
  invoke: "<invoke",
  invokeEnd: "</invoke>",
  param: "<parameter",
  paramEnd: "</parameter>",
  headerEnd: ">",
  callName: (header) => attribute(header, "name"),
  paramName: (header) => attribute(header, "name"),
  value: (raw, _header, schema) => typedValue(raw, schema)
}

export const minimaxM2: TagFormat = tagFormat({
  format: "minimax_m2",
  open: "<minimax:tool_call>",
  close: "</minimax:tool_call>",
  parse: (body, closed, tools) => parseInvokes(syntax, body, closed, tools)
})
