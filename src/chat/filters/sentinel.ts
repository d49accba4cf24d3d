/**
 * Drops chat-template end tokens from a stream of text deltas. A sentinel ends the model's turn: it and everything
 * after it are dropped, because models that run past their end token print template garbage.
 */

export const DEFAULT_SENTINELS: ReadonlyArray<string> = [
  "<|im_end|>",
  "<|eot_id|>",
  "<|end|>",
  "<|endoftext|>",
  "</s>",
  "<|end_of_text|>",
  "<｜end▁of▁sentence｜>"
]

interface Matcher {
  readonly sentinels: ReadonlyArray<string>
  /** Every proper, non-empty prefix of a sentinel: the suffixes worth holding back. */
  readonly prefixes: ReadonlySet<string>
  /** The distinct first chars of the sentinels: only where one occurs can a sentinel start. */
  readonly firstChars: ReadonlyArray<string>
  readonly longest: number
}

export interface SentinelState {
  readonly matcher: Matcher
  /** A suffix of the text so far that may still become a sentinel. */
  readonly held: string
  /** A sentinel was seen: the rest of the stream is dropped. */
  readonly ended: boolean
}

const buildMatcher = (sentinels: ReadonlyArray<string>): Matcher => {
  // An empty sentinel would match everywhere and swallow the whole stream.
  const nonEmpty = sentinels.filter((s) => s.length > 0)
  const prefixes = new Set<string>()
  for (const s of nonEmpty) for (let k = 1; k < s.length; k++) prefixes.add(s.slice(0, k))
  return {
    sentinels: nonEmpty,
    prefixes,
    firstChars: [...new Set(nonEmpty.map((s) => s.charAt(0)))],
    longest: Math.max(0, ...nonEmpty.map((s) => s.length))
  }
}

// One matcher per distinct sentinel list (there is one per model): built once, not per response.
const matchers = new Map<string, Matcher>()
const MAX_MATCHERS = 256

const makeMatcher = (sentinels: ReadonlyArray<string>): Matcher => {
  const key = sentinels.join("\u0000")
  const known = matchers.get(key)
  if (known !== undefined) return known
  if (matchers.size >= MAX_MATCHERS) matchers.clear()
  const built = buildMatcher(sentinels)
  matchers.set(key, built)
  return built
}

export const initial = (sentinels: ReadonlyArray<string>): SentinelState => ({
  matcher: makeMatcher(sentinels),
  held: "",
  ended: false
})

const sentinelAt = (matcher: Matcher, text: string, at: number): boolean =>
  matcher.sentinels.some((s) => text.startsWith(s, at))

type Scan = { readonly _tag: "Ended"; readonly at: number } | { readonly _tag: "Open"; readonly holdFrom: number }

/**
 * Where the earliest sentinel in `text` starts, or else (when `hold`) where the suffix that may still become one
 * starts. Only positions holding a sentinel's first char are tried, each found by one forward search per char.
 */
const scan = (matcher: Matcher, text: string, from: number, hold: boolean): Scan => {
  const next = matcher.firstChars.map((char) => ({ char, at: text.indexOf(char, from) }))
  for (;;) {
    let at = -1
    for (const n of next) if (n.at >= 0 && (at < 0 || n.at < at)) at = n.at
    if (at < 0) return { _tag: "Open", holdFrom: text.length }
    if (sentinelAt(matcher, text, at)) return { _tag: "Ended", at }
    // A sentinel completed later in this suffix must wait: one starting here would come first.
    if (hold && text.length - at < matcher.longest && matcher.prefixes.has(text.slice(at))) {
      return { _tag: "Open", holdFrom: at }
    }
    for (const n of next) if (n.at === at) n.at = text.indexOf(n.char, at + 1)
  }
}

export const append = (state: SentinelState, chunk: string): readonly [SentinelState, string] => {
  if (state.ended || chunk === "") return [state, ""]
  if (state.matcher.sentinels.length === 0) return [state, chunk]
  // `held` is shorter than the longest sentinel, so each chunk is scanned a bounded number of extra times.
  const text = state.held + chunk
  const found = scan(state.matcher, text, 0, true)
  if (found._tag === "Ended") return [{ matcher: state.matcher, held: "", ended: true }, text.slice(0, found.at)]
  return [{ matcher: state.matcher, held: text.slice(found.holdFrom), ended: false }, text.slice(0, found.holdFrom)]
}

/** The stream ended: a held partial was not a sentinel after all, though a shorter one may sit inside it. */
export const flush = (state: SentinelState): string => {
  const found = scan(state.matcher, state.held, 1, false)
  return found._tag === "Ended" ? state.held.slice(0, found.at) : state.held
}
