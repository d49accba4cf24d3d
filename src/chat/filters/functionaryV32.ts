/**
 * Functionary v3.2 (`meetkai-functionary-medium-v3.2.jinja`): the prompt ends with `>>>`, and the answer is a list
 * of messages, each a recipient line then its content: `all\nHello>>>get_weather\n{"city": "Oslo"}`. `all` is the
 * answer's text; any other recipient is a call whose content is its JSON arguments. The first recipient has no
 * marker of its own, so this filter runs only when the model is known to be Functionary v3.2 (`toolFormats`
 * names `functionary_v32`, or `auto` read it from the template): then it engages when the answer's first line is a
 * recipient, and otherwise passes the text on untouched.
 *
 * A pure streaming filter like `harmony.ts`: linear, and it holds only a partial `>>>` or an unfinished recipient
 * line (at most RECIPIENT_MAX chars).
 */
import { clip } from "../../common/clip.js"
import { argumentsText, parseJson, REASON_PART_CHARS } from "../toolcalls/json.js"
import type { ParsedToolCall } from "../toolcalls/types.js"

export type FunctionaryOutput =
  | { readonly _tag: "Content"; readonly text: string }
  | { readonly _tag: "Call"; readonly call: ParsedToolCall }
  | { readonly _tag: "Malformed"; readonly reason: string }

export type FunctionaryState =
  /** The answer's first line, not yet known to be a recipient. */
  | { readonly _tag: "Leading"; readonly held: string }
  /** Not this format: text is content. */
  | { readonly _tag: "Passing" }
  /** A recipient line after `>>>` (or at the start), not yet ended by its newline. */
  | { readonly _tag: "Recipient"; readonly line: string }
  /** The content of a message to `all`; `held` may be the start of `>>>`. */
  | { readonly _tag: "Text"; readonly held: string }
  /** The JSON arguments of a call to `name`, until the next `>>>` or the end. */
  | { readonly _tag: "Args"; readonly name: string; readonly body: string; readonly held: string }

const MARK = ">>>"
const WHERE = "functionary_v32"
/** A recipient is a name: a line longer than this, or with anything but name characters, is not one. */
const RECIPIENT_MAX = 128
const RECIPIENT = /^[A-Za-z_][\w.-]*$/
/** What the start of a recipient line may be (a carriage return may end it). */
const NAME_SO_FAR = /^[A-Za-z_][\w.-]*\r?$/

export const initial: FunctionaryState = { _tag: "Leading", held: "" }
const PASSING: FunctionaryState = { _tag: "Passing" }

export const engaged = (state: FunctionaryState): boolean => state._tag !== "Leading" && state._tag !== "Passing"

/** How many chars of `text`'s end may still be the start of `>>>`. */
const partialMark = (text: string): number =>
  text.endsWith(">>") ? 2 : text.endsWith(">") ? 1 : 0

const call = (name: string, body: string, out: Array<FunctionaryOutput>): void => {
  const parsed = parseJson(body.trim() === "" ? "{}" : body.trim())
  const args = parsed.ok ? argumentsText(parsed.value) : undefined
  if (args === undefined) {
    out.push({ _tag: "Malformed", reason: `${WHERE}: the arguments of ${clip(name, REASON_PART_CHARS)} are not a JSON object` })
  } else out.push({ _tag: "Call", call: { name, arguments: args } })
}

/** Whatever a recipient line decides: a message to `all`, a call's arguments, or (not a name) no recipient. */
const afterRecipient = (line: string): FunctionaryState | undefined => {
  const name = line.endsWith("\r") ? line.slice(0, -1) : line
  if (!RECIPIENT.test(name)) return undefined
  return name === "all" ? { _tag: "Text", held: "" } : { _tag: "Args", name, body: "", held: "" }
}

/** Steps through `text` from `state`; pushes what it decides. */
const scan = (state: FunctionaryState, text: string, out: Array<FunctionaryOutput>): FunctionaryState => {
  let s = state
  let rest = text
  while (rest !== "") {
    switch (s._tag) {
      case "Passing":
        out.push({ _tag: "Content", text: rest })
        return s
      case "Leading":
      case "Recipient": {
        const sofar = (s._tag === "Leading" ? s.held : s.line) + rest
        const nl = sofar.indexOf("\n")
        const line = nl < 0 ? sofar : sofar.slice(0, nl)
        // Undecided while the line may still be a name; decided at its newline, or as soon as it cannot be one.
        if (nl < 0 && line.length <= RECIPIENT_MAX && (line === "" || NAME_SO_FAR.test(line))) {
          return s._tag === "Leading" ? { _tag: "Leading", held: sofar } : { _tag: "Recipient", line: sofar }
        }
        const next = nl < 0 ? undefined : afterRecipient(line)
        if (next !== undefined) {
          s = next
          rest = sofar.slice(nl + 1)
          continue
        }
        // Not a recipient: at the start, not this format at all; after `>>>`, the marker and the line are text.
        if (s._tag === "Leading") {
          out.push({ _tag: "Content", text: sofar })
          return PASSING
        }
        out.push({ _tag: "Content", text: MARK })
        s = { _tag: "Text", held: "" }
        rest = sofar
        continue
      }
      case "Text": {
        const all = s.held + rest
        const at = all.indexOf(MARK)
        if (at < 0) {
          const keep = partialMark(all)
          if (all.length > keep) out.push({ _tag: "Content", text: all.slice(0, all.length - keep) })
          return { _tag: "Text", held: all.slice(all.length - keep) }
        }
        if (at > 0) out.push({ _tag: "Content", text: all.slice(0, at) })
        s = { _tag: "Recipient", line: "" }
        rest = all.slice(at + MARK.length)
        continue
      }
      case "Args": {
        const all = s.held + rest
        const at = all.indexOf(MARK)
        if (at < 0) {
          const keep = partialMark(all)
          return { _tag: "Args", name: s.name, body: s.body + all.slice(0, all.length - keep), held: all.slice(all.length - keep) }
        }
        call(s.name, s.body + all.slice(0, at), out)
        s = { _tag: "Recipient", line: "" }
        rest = all.slice(at + MARK.length)
        continue
      }
    }
  }
  return s
}

export const append = (
  state: FunctionaryState,
  chunk: string
): readonly [FunctionaryState, ReadonlyArray<FunctionaryOutput>] => {
  if (state._tag === "Passing") return [state, chunk === "" ? [] : [{ _tag: "Content", text: chunk }]]
  const out: Array<FunctionaryOutput> = []
  return [scan(state, chunk, out), out]
}

/**
 * `cutOff`: the token limit cut the answer, so what is held is a message cut short: a recipient line or a partial
 * `>>>` is dropped, never shown, and no call is made of a cut recipient.
 */
export const flush = (state: FunctionaryState, cutOff = false): ReadonlyArray<FunctionaryOutput> => {
  if (cutOff && state._tag !== "Args") return []
  switch (state._tag) {
    case "Passing":
      return []
    case "Leading":
      return state.held === "" ? [] : [{ _tag: "Content", text: state.held }]
    case "Recipient": {
      // A last recipient line without content: a call with no arguments, or nothing to say.
      const next = afterRecipient(state.line)
      if (next === undefined) return state.line === "" ? [] : [{ _tag: "Content", text: MARK + state.line }]
      const out: Array<FunctionaryOutput> = []
      if (next._tag === "Args") call(next.name, "", out)
      return out
    }
    case "Text":
      return state.held === "" ? [] : [{ _tag: "Content", text: state.held }]
    case "Args": {
      const out: Array<FunctionaryOutput> = []
      call(state.name, state.body + state.held, out)
      return out
    }
  }
}
