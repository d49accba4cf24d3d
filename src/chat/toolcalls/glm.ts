/**
 * GLM-4.5 / 4.6: `<tool_call>NAME\n<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n…</tool_call>`; GLM-4.7 / 5
 * (and poolside Laguna) write the same without the newlines. One call per block. They share `<tool_call>` with xml
 * (a JSON body) and qwen3_xml (a `<function=` body) and claim only a body that is a name then `<arg_key>` or nothing.
 */
import type { TagFormat } from "./block.js"
import { claimsPairs, type PairSyntax, parsePairCall } from "./argPairs.js"

const syntax: PairSyntax = {
  where: "<tool_call>",
  key: "<arg_key>",
  keyEnd: "</arg_key>",
  value: "<arg_value>",
  valueEnd: "</arg_value>"
}

const glmFormat = (format: "glm45" | "glm47"): TagFormat => ({
  format,
  open: "<tool_call>",
  close: "</tool_call>",
  committed: "<tool_call".length,
  claims: (body) => claimsPairs(syntax, body),
  parse: (body, closed, tools) => parsePairCall(syntax, body, closed, tools)
})

export const glm45 = glmFormat("glm45")
export const glm47 = glmFormat("glm47")
