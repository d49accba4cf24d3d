import type { TokenLogprob } from "../protocol/RunEvent.js"
import type { SessionInput } from "./session.js"

/**
 * The inputs of one batch (what arrived together) with adjacent text deltas
 * of the same kind joined: the session's output is the same for any split of
 * the text (property-tested), so a read of 200 events costs one step instead
 * of 200, and the response writes one chunk for them.
 */
export const coalesce = (inputs: ReadonlyArray<SessionInput>): ReadonlyArray<SessionInput> => {
  if (inputs.length < 2) return inputs
  const out: Array<SessionInput> = []
  let tag: "Delta" | "ReasoningDelta" | undefined
  let text = ""
  // Entries are laid over the joined text just as over its parts (logprobs.ts).
  let logprobs: Array<TokenLogprob> | undefined
  const flushText = () => {
    if (tag !== undefined) out.push(logprobs === undefined ? { _tag: tag, text } : { _tag: "Delta", text, logprobs })
    tag = undefined
    text = ""
    logprobs = undefined
  }
  for (const input of inputs) {
    if (input._tag === "Delta" || input._tag === "ReasoningDelta") {
      if (input._tag !== tag) flushText()
      tag = input._tag
      text += input.text
      if (input._tag === "Delta" && input.logprobs !== undefined) (logprobs ??= []).push(...input.logprobs)
    } else {
      flushText()
      out.push(input)
    }
  }
  flushText()
  return out
}
