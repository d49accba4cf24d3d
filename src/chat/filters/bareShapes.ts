/** The marker-less whole-answer shapes (`BareFormat`s) as the hold-back steps them: which start, which parse. */
import type { BareFormat } from "../toolcalls/block.js"
import type { ParsedToolCall, RequestTool } from "../toolcalls/types.js"

/** Per bare format, its start state when the response starts with its first char; undefined when none does. */
export const bareStates = (bare: ReadonlyArray<BareFormat>, code: number): ReadonlyArray<number | undefined> | undefined => {
  const states = bare.map((f) => (f.first === code ? f.start : undefined))
  return states.some((s) => s !== undefined) ? states : undefined
}

/** The calls of the first closed bare shape that parses to some; undefined when none does (the text is text). */
export const bareCalls = (
  formats: ReadonlyArray<BareFormat>,
  states: ReadonlyArray<number | undefined>,
  text: string,
  tools: ReadonlyArray<RequestTool>
): ReadonlyArray<ParsedToolCall> | undefined => {
  for (let k = 0; k < formats.length; k++) {
    const f = formats[k]
    const s = states[k]
    if (f === undefined || s === undefined || !f.done(s)) continue
    const found = f.parse(text, tools)
    if (found !== undefined && found.length > 0) return found
  }
  return undefined
}
