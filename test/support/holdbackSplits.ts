import * as Holdback from "../../src/chat/filters/holdback.js"
import type { ParsedToolCall } from "../../src/chat/toolcalls/types.js"

export { randomCase, splitAt } from "./splits.js"

/** The hold-back's outputs as every split of a response must agree on them: texts merged, reasons dropped. */
export type Event =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Call"; readonly call: ParsedToolCall }
  | { readonly _tag: "Malformed" }

export const canonical = (outputs: ReadonlyArray<Holdback.ToolTextOutput>): ReadonlyArray<Event> => {
  const events: Array<Event> = []
  for (const o of outputs) {
    const last = events[events.length - 1]
    if (o._tag === "Text") {
      if (last?._tag === "Text") events[events.length - 1] = { _tag: "Text", text: last.text + o.text }
      else events.push({ _tag: "Text", text: o.text })
    } else events.push(o._tag === "Call" ? { _tag: "Call", call: o.call } : { _tag: "Malformed" })
  }
  return events
}

/** Every output of a response streamed in these chunks (append each, then flush). */
export const outputsOf = (
  chunks: ReadonlyArray<string>,
  options: Holdback.ToolTextOptions
): ReadonlyArray<Holdback.ToolTextOutput> => outputsFrom(Holdback.initial(options), chunks)

/** `outputsOf` from a given start state (a registry of the test's own, `Holdback.initialWith`). */
export const outputsFrom = (
  start: Holdback.ToolTextState,
  chunks: ReadonlyArray<string>
): ReadonlyArray<Holdback.ToolTextOutput> => {
  let state = start
  const outputs: Array<Holdback.ToolTextOutput> = []
  for (const chunk of chunks) {
    const [next, out] = Holdback.append(state, chunk)
    state = next
    outputs.push(...out)
  }
  outputs.push(...Holdback.flush(state))
  return outputs
}
