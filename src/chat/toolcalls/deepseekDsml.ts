/**
 * DeepSeek DSML (V3.2): `<｜DSML｜function_calls>` holding `<｜DSML｜invoke name="NAME">` elements, each with
 * `<｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>` per argument (`｜` is the
 * fullwidth U+FF5C). `string="true"` marks the value as raw text; `string="false"` as JSON. V4 writes the same body inside
 * `<｜DSML｜tool_calls>`.
 */
import { type TagFormat, tagFormat } from "./block.js"
import { attribute, type InvokeSyntax, parseInvokes } from "./invokes.js"
import { parseJson } from "./json.js"
import { typedValue } from "./typedArgs.js"

// The model says which values are text: a string stays as written, JSON is parsed (and typed by the schema when it
// is not JSON after all); with no attribute the schema decides.
const dsmlValue = (raw: string, header: string, schema: unknown): unknown => {
  const string = attribute(header, "string")?.toLowerCase()
  if (string === "true") return raw
  if (string === "false") {
    const parsed = parseJson(raw.trim())
    if (parsed.ok) return parsed.value
  }
  return typedValue(raw, schema)
}

const syntax = (where: string): InvokeSyntax => ({
  where,
  invoke: "<｜dsml｜invoke",
  invokeEnd: "</｜dsml｜invoke>",
  param: "<｜dsml｜parameter",
  paramEnd: "</｜dsml｜parameter>",
  headerEnd: ">",
  callName: (header) => attribute(header, "name"),
  paramName: (header) => attribute(header, "name"),
  value: dsmlValue
})

const V32 = syntax("<｜DSML｜function_calls>")
const V4 = syntax("<｜DSML｜tool_calls>")

export const deepseekV32: TagFormat = tagFormat({
  format: "deepseek_v32",
  open: "<｜DSML｜function_calls>",
  close: "</｜DSML｜function_calls>",
  parse: (body, closed, tools) => parseInvokes(V32, body, closed, tools)
})

export const deepseekV4: TagFormat = tagFormat({
  format: "deepseek_v4",
  open: "<｜DSML｜tool_calls>",
  close: "</｜DSML｜tool_calls>",
  parse: (body, closed, tools) => parseInvokes(V4, body, closed, tools)
})
