/** How the session puts content out: text with its logprobs, held for the completion tool, calls and malformed markup. */
import type { TokenLogprob } from "../protocol/RunEvent.js"
import type * as Holdback from "./filters/holdback.js"
import * as Logprobs from "./logprobs.js"
import { type Emission, MALFORMED_KEPT, type Open, preview } from "./sessionTypes.js"

/** The raw offset of the tool-text filter's input chunk, and where each of its Text outputs ends in it. */
export type Placed = { readonly at: number; readonly ends: ReadonlyArray<number> }

export const toolParts = (s: Open, parts: ReadonlyArray<Holdback.ToolTextOutput>, out: Array<Emission>, placed?: Placed): Open => {
  let next = s
  let texts = 0
  for (const part of parts) {
    switch (part._tag) {
      case "Text":
        next = emitText(next, part.text, out, placed && placed.at + (placed.ends[texts++] ?? 0) - part.text.length)
        break
      case "Call":
        next = { ...next, textCalls: [...next.textCalls, part.call] }
        break
      case "Malformed":
        next = {
          ...next,
          malformed: next.malformed.length < MALFORMED_KEPT ? [...next.malformed, part.reason] : next.malformed,
          malformedCount: next.malformedCount + 1
        }
        break
    }
  }
  return next
}

export const contentOf = (text: string, logprobs: ReadonlyArray<TokenLogprob>): Emission =>
  logprobs.length > 0 ? { _tag: "Content", text, logprobs } : { _tag: "Content", text }

/** `at`: the raw offset of `text`, when logprobs are tracked. */
export const emitText = (s: Open, text: string, out: Array<Emission>, at?: number): Open => {
  if (text === "") return s
  if (s.logprobs !== undefined && at !== undefined) return emitTracked(s, s.logprobs, text, out, at)
  const sawContent = s.sawContent || /\S/.test(text)
  if (s.config.policy.completionTool !== null) return { ...s, held: s.held + text, sawContent }
  out.push({ _tag: "Content", text })
  return {
    ...s,
    sawContent,
    contentChars: s.contentChars + text.length,
    contentPreview: preview(s.contentPreview, text)
  }
}

/** `emitText` with logprobs: the entries of what is shown go with it (or wait with the completion tool's text). */
const emitTracked = (s: Open, lp: Logprobs.LogprobState, text: string, out: Array<Emission>, at: number): Open => {
  const [shown, released] = Logprobs.show(lp, at, at + text.length)
  // The untracked emission's state; its Content goes out with the entries.
  const next = emitText({ ...s, logprobs: undefined }, text, [])
  if (s.config.policy.completionTool !== null) return { ...next, logprobs: Logprobs.hold(shown, released) }
  out.push(contentOf(text, released))
  return { ...next, logprobs: shown }
}
