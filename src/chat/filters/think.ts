/**
 * Routes a leading `<think>…</think>` block of streamed content to reasoning. Only the first block, at the very start
 * of content (after optional whitespace), is routed; anything later is ordinary content.
 */

export interface ThinkOptions {
  /** The chat template opened the block in the prompt: output is reasoning until `</think>`. */
  readonly implicitOpen: boolean
}

export interface ThinkOutput {
  readonly content: string
  readonly reasoning: string
}

export type ThinkState =
  /** Not yet known whether content starts with `<think>`; `held` is whitespace then `matched` chars of the tag. */
  | { readonly _tag: "Leading"; readonly implicitOpen: boolean; readonly held: string; readonly matched: number }
  /** In the block; `held` may be the start of `</think>`. */
  | { readonly _tag: "Inside"; readonly held: string }
  /** Just after `</think>`: whitespace is dropped until the answer starts. */
  | { readonly _tag: "AfterClose" }
  | { readonly _tag: "Passing" }

const OPEN = "<think>"
const CLOSE = "</think>"

const EMPTY: ThinkOutput = { content: "", reasoning: "" }
const AFTER_CLOSE: ThinkState = { _tag: "AfterClose" }
const PASSING: ThinkState = { _tag: "Passing" }

/** Exactly the code units JavaScript's `\s` matches, so the filter agrees with `/^\s+/`. */
export const isWhitespace = (unit: number): boolean =>
  (unit >= 9 && unit <= 13) || unit === 32 || unit === 160 || unit === 5760 || (unit >= 8192 && unit <= 8202) ||
  unit === 8232 || unit === 8233 || unit === 8239 || unit === 8287 || unit === 12288 || unit === 65279

/** ASCII-only case folding: the tags are ASCII and locale rules must not make other characters match them. */
const sameLetter = (unit: number, tagUnit: number): boolean =>
  unit === tagUnit || (unit >= 65 && unit <= 90 && unit + 32 === tagUnit)

/** How many chars of `tag` match `text` from `at` on, stopping at the first mismatch or the end of `text`. */
const matchLength = (text: string, at: number, tag: string): number => {
  let k = 0
  while (k < tag.length && at + k < text.length && sameLetter(text.charCodeAt(at + k), tag.charCodeAt(k))) k++
  return k
}

export const initial = (options: ThinkOptions): ThinkState => ({
  _tag: "Leading",
  implicitOpen: options.implicitOpen,
  held: "",
  matched: 0
})

const output = (content: string, reasoning: string): ThinkOutput =>
  content === "" && reasoning === "" ? EMPTY : { content, reasoning }

const plus = (a: ThinkOutput, b: ThinkOutput): ThinkOutput =>
  output(a.content + b.content, a.reasoning + b.reasoning)

const afterClose = (text: string): readonly [ThinkState, ThinkOutput] => {
  let i = 0
  while (i < text.length && isWhitespace(text.charCodeAt(i))) i++
  return i === text.length ? [AFTER_CLOSE, EMPTY] : [PASSING, output(text.slice(i), "")]
}

const inside = (held: string, chunk: string): readonly [ThinkState, ThinkOutput] => {
  // `held` is shorter than `</think>`, so rescanning it keeps the filter linear.
  const text = held + chunk
  let at = text.indexOf("<")
  while (at >= 0) {
    const k = matchLength(text, at, CLOSE)
    if (k === CLOSE.length) {
      const [state, rest] = afterClose(text.slice(at + CLOSE.length))
      return [state, plus(output("", text.slice(0, at)), rest)]
    }
    // The text ends in a partial `</think>`: `<` appears once in the tag, so nothing later can start one.
    if (at + k === text.length) return [{ _tag: "Inside", held: text.slice(at) }, output("", text.slice(0, at))]
    at = text.indexOf("<", at + 1)
  }
  return [{ _tag: "Inside", held: "" }, output("", text)]
}

const leading = (
  state: Extract<ThinkState, { _tag: "Leading" }>,
  chunk: string
): readonly [ThinkState, ThinkOutput] => {
  let i = 0
  let matched = state.matched
  if (matched === 0) while (i < chunk.length && isWhitespace(chunk.charCodeAt(i))) i++
  while (i < chunk.length && matched < OPEN.length && sameLetter(chunk.charCodeAt(i), OPEN.charCodeAt(matched))) {
    i++
    matched++
  }
  // Whitespace before the tag is dropped.
  if (matched === OPEN.length) return inside("", chunk.slice(i))
  if (i === chunk.length) return [{ ...state, held: state.held + chunk, matched }, EMPTY]
  // Not a think tag: what was held is ordinary output.
  if (state.implicitOpen) return inside("", state.held + chunk)
  return [PASSING, output(state.held + chunk, "")]
}

export const append = (state: ThinkState, chunk: string): readonly [ThinkState, ThinkOutput] => {
  if (chunk === "") return [state, EMPTY]
  switch (state._tag) {
    case "Leading":
      return leading(state, chunk)
    case "Inside":
      return inside(state.held, chunk)
    case "AfterClose":
      return afterClose(chunk)
    case "Passing":
      return [state, output(chunk, "")]
  }
}

/** How many chars of the input are held, undecided (always the end of the input so far). */
export const heldChars = (state: ThinkState): number =>
  state._tag === "Leading" || state._tag === "Inside" ? state.held.length : 0

/** The state once `flush` released what was held. */
export const FLUSHED: ThinkState = PASSING

/** The stream ended: held text was not a tag after all, and goes where it was heading. */
export const flush = (state: ThinkState): ThinkOutput => {
  switch (state._tag) {
    case "Leading":
      return state.implicitOpen ? output("", state.held) : output(state.held, "")
    case "Inside":
      return output("", state.held)
    case "AfterClose":
    case "Passing":
      return EMPTY
  }
}
