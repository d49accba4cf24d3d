import type { TokenLogprob } from "../protocol/RunEvent.js"

/**
 * Which token logprob entries go out with which content (pure; the session's bookkeeping for `logprobs`).
 *
 * The rule. The entries of a run are laid end to end over its raw content text (the Delta texts joined), each
 * covering `chars ?? token.length` code units of it; where they cover is independent of how the text was cut
 * into deltas. The filters (end tokens, a leading think block, tool-call markup) keep the order of the chars
 * they let through, and each holds back only the end of its input. So each shown char has a raw offset, and:
 *
 * - an entry is released with the Content emission that carries the first shown char of its text (a zero-length
 *   entry goes with the char before it), so a token split across deltas goes out once, with its first visible part;
 * - an entry none of whose chars is shown is dropped: its text became reasoning, a tool call, whitespace around
 *   one, or an end token. It is dropped as soon as its text is settled (no filter holds any of it), or at the end;
 * - with a completion tool, released entries wait with the held text: they go out with it, or not at all when it
 *   is wrapped into the call. Nothing is released after the terminal emission.
 *
 * "Settled" is the offset before which every raw char went through the filters and came out shown or dropped:
 * the start of what the think filter holds, or (with tool-text parsing, once content flows) the end of the last
 * text it let through.
 */

interface Pending {
  readonly entry: TokenLogprob
  /** The raw content offsets of the entry's text, [start, end). */
  readonly start: number
  readonly end: number
}

export interface LogprobState {
  /** Entries neither released nor dropped yet, in order. */
  readonly pending: ReadonlyArray<Pending>
  /** Where the next entry's text starts. */
  readonly next: number
  /** Raw chars the end-token filter let through (it passes a prefix of the raw text: offsets are kept). */
  readonly passed: number
  /** Chars the think filter let through as content. */
  readonly content: number
  /** The raw offset of the first content char (content is the end of the think filter's input), once there is one. */
  readonly contentStart: number | undefined
  /** Where the last shown text ended, as an offset in the content (the tool-text filter's input). */
  readonly shown: number
  /** Released entries of content kept back for the completion tool. */
  readonly held: ReadonlyArray<TokenLogprob>
}

const INITIAL: LogprobState = { pending: [], next: 0, passed: 0, content: 0, contentStart: undefined, shown: 0, held: [] }

export const NONE: ReadonlyArray<TokenLogprob> = []

const charsOf = (entry: TokenLogprob): number => {
  const n = entry.chars
  return n !== undefined && Number.isInteger(n) && n >= 0 ? n : entry.token.length
}

/**
 * A Delta's entries, laid after the ones before. `ended`: the end-token filter already ended the content, so
 * the delta's text is dropped, and its entries with it.
 */
export const intake = (
  state: LogprobState | undefined,
  entries: ReadonlyArray<TokenLogprob> | undefined,
  ended: boolean
): LogprobState => {
  const s = state ?? INITIAL
  if (entries === undefined || entries.length === 0) return s
  let next = s.next
  if (ended) {
    for (const entry of entries) next += charsOf(entry)
    return { ...s, next }
  }
  const pending = [...s.pending]
  for (const entry of entries) {
    const end = next + charsOf(entry)
    pending.push({ entry, start: next, end })
    next = end
  }
  return { ...s, pending, next }
}

/** The end-token filter let `n` more chars through. */
export const passed = (s: LogprobState, n: number): LogprobState => (n === 0 ? s : { ...s, passed: s.passed + n })

/**
 * The think filter let `n` chars of content through, holding `thinkHeld` chars: the state, and the raw offset
 * of the first of them.
 */
export const contentOut = (s: LogprobState, n: number, thinkHeld: number): readonly [LogprobState, number] => {
  // Content is the end of what the think filter settled: its start is fixed by the first content out.
  const contentStart = s.contentStart ?? s.passed - thinkHeld - (s.content + n)
  return [{ ...s, content: s.content + n, contentStart }, contentStart + s.content]
}

/** The raw offset of the end of the content so far (where the tool-text filter's input ends). */
export const contentEnd = (s: LogprobState): number => (s.contentStart ?? 0) + s.content

/** Raw chars [from, to) are shown: the entries to release with them; those wholly before `from` are dropped. */
export const show = (s: LogprobState, from: number, to: number): readonly [LogprobState, ReadonlyArray<TokenLogprob>] => {
  const pending = s.pending
  let i = 0
  let released: Array<TokenLogprob> | undefined
  for (; i < pending.length; i++) {
    const p = pending[i]
    if (p === undefined) break
    if (p.end <= from) continue
    // A zero-length entry goes with the char before it.
    if ((p.start === p.end ? p.start - 1 : p.start) >= to) break
    ;(released ??= []).push(p.entry)
  }
  const shown = Math.max(s.shown, to - (s.contentStart ?? 0))
  return [{ ...s, pending: i === 0 ? pending : pending.slice(i), shown }, released ?? NONE]
}

/** Drops the entries whose text is settled without having shown anything (see the rule above). */
export const settle = (s: LogprobState, thinkHeld: number, toolText: boolean): LogprobState => {
  const settled = toolText && s.contentStart !== undefined ? s.contentStart + s.shown : s.passed - thinkHeld
  const pending = s.pending
  let i = 0
  while (i < pending.length && (pending[i]?.end ?? Infinity) <= settled) i++
  return i === 0 ? s : { ...s, pending: pending.slice(i) }
}

/** Released entries of content the completion tool keeps back. */
export const hold = (s: LogprobState, released: ReadonlyArray<TokenLogprob>): LogprobState =>
  released.length === 0 ? s : { ...s, held: [...s.held, ...released] }
