/**
 * Tencent Hy3: `<tool_calls:opensource>` holding one `<tool_call:opensource>NAME<tool_sep:opensource>` element per
 * call, each with `<arg_key:opensource>KEY</arg_key:opensource><arg_value:opensource>VALUE</arg_value:opensource>`
 * pairs (newlines between), closed by `</tool_call:opensource>` and `</tool_calls:opensource>`.
 */
import { type BlockResult, calls, malformed, type TagFormat } from "./block.js"
import { type PairSyntax, parsePairCall } from "./argPairs.js"
import { finder } from "./invokes.js"
import type { ParsedToolCall, RequestTool } from "./types.js"

const CALL = "<tool_call:opensource>"
const CALL_END = "</tool_call:opensource>"

const syntax: PairSyntax = {
  where: "<tool_calls:opensource>",
  key: "<arg_key:opensource>",
  keyEnd: "</arg_key:opensource>",
  value: "<arg_value:opensource>",
  valueEnd: "</arg_value:opensource>",
  nameEnd: "<tool_sep:opensource>"
}

const parse = (body: string, closed: boolean, tools: ReadonlyArray<RequestTool>): BlockResult => {
  const nextCall = finder(body, CALL)
  const nextEnd = finder(body, CALL_END)
  const out: Array<ParsedToolCall> = []
  for (let at = nextCall(0); at >= 0;) {
    const start = at + CALL.length
    const following = nextCall(start)
    const end = nextEnd(start)
    const finished = end >= 0 && (following < 0 || end < following)
    // Only the last call can be cut off by the end of the stream; an earlier one is ended by the next.
    const whole = finished || following >= 0 || closed
    const stop = finished ? end : following >= 0 ? following : body.length
    const result = parsePairCall(syntax, body.slice(start, stop), whole, tools)
    if (result._tag === "Malformed") return result
    out.push(...result.calls)
    at = following
  }
  return out.length > 0 ? calls(out) : malformed(`${syntax.where}: no ${CALL}`)
}

export const hy3: TagFormat = {
  format: "hy3",
  open: "<tool_calls:opensource>",
  close: "</tool_calls:opensource>",
  committed: "<tool_calls:opensource".length,
  claims: () => true,
  parse
}
