/**
 * Routes a leading reasoning block of streamed content to reasoning: `<think>…</think>` and the other families'
 * pairs (`DEFAULT_THINK_PAIRS`). Only the first block, at the very start of content (after optional whitespace), is
 * routed; anything later is ordinary content.
 */

/** One family's reasoning block. Markers are ASCII and match in any ASCII case; no open is a prefix of another. */
export interface ThinkPair {
  readonly open: string
  readonly close: string
}

/** The leading reasoning blocks the chat templates teach (see each family's template). */
export const DEFAULT_THINK_PAIRS: ReadonlyArray<ThinkPair> = [
  // Qwen3/QwQ, DeepSeek R1/V3.x/V4, GLM-4.6/4.7, Kimi-K2-Thinking, MiniMax-M2, StepFun 3.5, Nemotron, SmolLM3,
  // MiniCPM, Granite 3.3, Laguna, Reka, LFM2.5, Bielik, …
  { open: "<think>", close: "</think>" },
  { open: "<seed:think>", close: "</seed:think>" }, // ByteDance Seed-OSS
  { open: "[THINK]", close: "[/THINK]" }, // Mistral (Ministral 3 Reasoning, Magistral)
  { open: "<|channel>thought", close: "<channel|>" }, // Gemma 4
  { open: "<|START_THINKING|>", close: "<|END_THINKING|>" }, // Cohere Command R7B / Command A
  { open: "<mm:think>", close: "</mm:think>" }, // MiniMax-M3
  { open: "<think:opensource>", close: "</think:opensource>" }, // Tencent Hy3
  { open: "<|inner_prefix|>", close: "<|inner_suffix|>" }, // Apertus
  { open: "<|open|>think<|sep|>", close: "<|close|>think<|sep|>" } // Kimi-K3
]

export interface ThinkOptions {
  /** The chat template opened the block in the prompt: output is reasoning until a close marker. */
  readonly implicitOpen: boolean
  /** The blocks recognised (`DEFAULT_THINK_PAIRS` when absent). With `implicitOpen`, any pair's close ends it. */
  readonly pairs?: ReadonlyArray<ThinkPair> | undefined
}

export interface ThinkOutput {
  readonly content: string
  readonly reasoning: string
}

export type ThinkState =
  /**
   * Not yet known whether content starts with an open marker; `held` is all input so far, `probe` the part of it
   * after the leading whitespace (shorter than the longest open marker).
   */
  | {
    readonly _tag: "Leading"
    readonly implicitOpen: boolean
    readonly pairs: ReadonlyArray<ThinkPair>
    readonly held: string
    readonly probe: string
  }
  /** In the block; `held` may be the start of one of `closes`. */
  | { readonly _tag: "Inside"; readonly closes: ReadonlyArray<string>; readonly held: string }
  /** Just after the close marker: whitespace is dropped until the answer starts. */
  | { readonly _tag: "AfterClose" }
  | { readonly _tag: "Passing" }

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

const asciiLower = (text: string): string => text.replace(/[A-Z]/g, (c) => c.toLowerCase())

/** Pairs in ASCII lower case, as `matchLength` compares them; markers that are empty are left out. */
const lowered = (pairs: ReadonlyArray<ThinkPair>): ReadonlyArray<ThinkPair> =>
  pairs
    .filter((p) => p.open !== "" && p.close !== "")
    .map((p) => ({ open: asciiLower(p.open), close: asciiLower(p.close) }))

const DEFAULT_LOWERED = lowered(DEFAULT_THINK_PAIRS)

export const initial = (options: ThinkOptions): ThinkState => ({
  _tag: "Leading",
  implicitOpen: options.implicitOpen,
  pairs: options.pairs === undefined ? DEFAULT_LOWERED : lowered(options.pairs),
  held: "",
  probe: ""
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

/** The chars a close marker (in lower case) may start with, in either ASCII case. */
const firstChars = (closes: ReadonlyArray<string>): ReadonlyArray<string> => [
  ...new Set(closes.flatMap((c) => [c.charAt(0), c.charAt(0).replace(/[a-z]/, (l) => l.toUpperCase())]))
]

type CloseScan =
  | { readonly _tag: "Closed"; readonly at: number; readonly length: number }
  /** No close: `holdFrom` is where a suffix that may still become one starts (the end of `text` when none). */
  | { readonly _tag: "Open"; readonly holdFrom: number }

/**
 * The earliest close marker in `text`, or else (when `hold`) the suffix that may still become one. Only positions
 * holding a close's first char are tried, each found by one forward search per char.
 */
const scanClose = (closes: ReadonlyArray<string>, text: string, hold: boolean): CloseScan => {
  const next = firstChars(closes).map((char) => ({ char, at: text.indexOf(char) }))
  for (;;) {
    let at = -1
    for (const n of next) if (n.at >= 0 && (at < 0 || n.at < at)) at = n.at
    if (at < 0) return { _tag: "Open", holdFrom: text.length }
    let partial = false
    for (const close of closes) {
      const k = matchLength(text, at, close)
      if (k === close.length) return { _tag: "Closed", at, length: k }
      if (at + k === text.length) partial = true
    }
    // A close completed later in this suffix must wait: one starting here would come first.
    if (hold && partial) return { _tag: "Open", holdFrom: at }
    for (const n of next) if (n.at === at) n.at = text.indexOf(n.char, at + 1)
  }
}

const inside = (closes: ReadonlyArray<string>, held: string, chunk: string): readonly [ThinkState, ThinkOutput] => {
  // `held` is shorter than the longest close marker, so rescanning it keeps the filter linear.
  const text = held + chunk
  const found = scanClose(closes, text, true)
  if (found._tag === "Closed") {
    const [state, rest] = afterClose(text.slice(found.at + found.length))
    return [state, plus(output("", text.slice(0, found.at)), rest)]
  }
  return [{ _tag: "Inside", closes, held: text.slice(found.holdFrom) }, output("", text.slice(0, found.holdFrom))]
}

const leading = (
  state: Extract<ThinkState, { _tag: "Leading" }>,
  chunk: string
): readonly [ThinkState, ThinkOutput] => {
  let i = 0
  if (state.probe === "") while (i < chunk.length && isWhitespace(chunk.charCodeAt(i))) i++
  const held = state.held + chunk
  if (i === chunk.length && state.probe === "") return [{ ...state, held }, EMPTY]
  const probe = state.probe + chunk.slice(i)
  let prefix = false
  for (const pair of state.pairs) {
    const k = matchLength(probe, 0, pair.open)
    // Whitespace before the open marker is dropped.
    if (k === pair.open.length) return inside([pair.close], "", probe.slice(k))
    if (k === probe.length) prefix = true
  }
  if (prefix) return [{ ...state, held, probe }, EMPTY]
  // Not an open marker: what was held is ordinary output.
  if (state.implicitOpen) return inside(closesOf(state.pairs), "", held)
  return [PASSING, output(held, "")]
}

const closesOf = (pairs: ReadonlyArray<ThinkPair>): ReadonlyArray<string> => pairs.map((p) => p.close)

export const append = (state: ThinkState, chunk: string): readonly [ThinkState, ThinkOutput] => {
  if (chunk === "") return [state, EMPTY]
  switch (state._tag) {
    case "Leading":
      return leading(state, chunk)
    case "Inside":
      return inside(state.closes, state.held, chunk)
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

/** The stream ended: held text was not a marker after all (though a shorter close may sit inside it). */
export const flush = (state: ThinkState): ThinkOutput => {
  switch (state._tag) {
    case "Leading":
      return state.implicitOpen ? output("", state.held) : output(state.held, "")
    case "Inside": {
      const found = scanClose(state.closes, state.held, false)
      if (found._tag === "Open") return output("", state.held)
      return plus(output("", state.held.slice(0, found.at)), afterClose(state.held.slice(found.at + found.length))[1])
    }
    case "AfterClose":
    case "Passing":
      return EMPTY
  }
}
