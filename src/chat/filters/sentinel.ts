/**
 * Drops chat-template end tokens from a stream of text deltas. A sentinel ends the model's turn: it and everything
 * after it are dropped, because models that run past their end token print template garbage.
 */

/**
 * The tokens that end the assistant's turn in the chat templates of the tool-capable families. Each is one special
 * token after which nothing of the turn follows, so tool-call markup before it is whole. Generic-looking text
 * (`<sep>`, `</assistant>`) is left to the models that need it (`sentinels.tokens` of the model's options).
 */
export const DEFAULT_SENTINELS: ReadonlyArray<string> = [
  "<|im_end|>", // ChatML: Qwen, Hermes, Nemotron 3, SmolLM3, MiniCPM, StepFun, LFM, Bielik, MiMo, Kimi-K2
  "<|eot_id|>", // Llama 3.x, Functionary, FireFunction
  "<|eom_id|>", // Llama 3.1/3.3 after a built-in `<|python_tag|>` call (the call ends with the stream)
  // Phi-3.5, Apriel. Harmony (gpt-oss) also writes it between messages: harmony.ts runs first and consumes it.
  // Solar Open writes it after its `<|think|>` reasoning too, and needs a filter of its own like harmony's.
  "<|end|>",
  "<|endoftext|>",
  "</s>", // Mistral
  "<|end_of_text|>", // Granite
  "<｜end▁of▁sentence｜>", // DeepSeek
  "<|return|>", // gpt-oss, should a harmony response reach this filter unparsed
  "<end_of_turn>", // Gemma 2/3
  "<turn|>", // Gemma 4
  "<|tool_response>", // Gemma 4 after its calls: the model hands over to the tool
  "<|END_OF_TURN_TOKEN|>", // Cohere Command R / R7B / A
  "<|eot|>", // Llama 4, Muse
  "<|end_of_msg|>", // Kimi-K3
  "<|assistant_end|>", // Apertus
  "<seed:eos>", // ByteDance Seed-OSS
  "[e~[", // MiniMax-M2/M3
  "<end_of_sentence>", // MiniMax-M1
  "<SPECIAL_12>", // Nemotron Nano v2
  "〈|EOS|〉", // Poolside Laguna
  "<｜hy_eos:opensource｜>", // Tencent Hy3
  "<|message_sep|>", // GigaChat 3 (its `<|function_call|>` body ends with the stream)
  "<|user|>", // GLM-4.x has no end token: it stops by starting the next turn
  "<|observation|>" // GLM-4.x after its calls
]

/**
 * End-looking tokens that must not be sentinels: the sentinel filter runs before tool-call parsing, and these close
 * a tool-call block that more of the turn may follow, or separate parts of one answer.
 */
export const NOT_SENTINELS: ReadonlyArray<{ readonly token: string; readonly why: string }> = [
  { token: "<|call|>", why: "harmony: ends a call message; more calls may follow when the server does not stop" },
  { token: "<|eom|>", why: "Muse: ends one message of several in a turn (Llama 4 uses it as a turn end: per model)" },
  { token: "<|python_end|>", why: "Llama 4: closes a python/tool block" },
  { token: "<|tool_call_end|>", why: "Kimi-K2, LFM2.5: closes one call of several" },
  { token: "<|tool_calls_section_end|>", why: "Kimi-K2: closes the calls section, parsed as markup" },
  { token: "<|END_ACTION|>", why: "Cohere: closes the action block the format parses" },
  { token: "<|END_RESPONSE|>", why: "Cohere R7B: closes the response block" },
  { token: "</tool_call>", why: "Hermes, Qwen, GLM, MiniMax: closes one call of several" },
  { token: "<｜tool▁calls▁end｜>", why: "DeepSeek: closes the calls block the format parses" },
  { token: "<tool_call|>", why: "Gemma 4: closes one call of several" },
  { token: "<|tools_suffix|>", why: "Apertus: closes the calls list" },
  { token: "<|calls|>", why: "Solar Open: closes the calls list" },
  { token: "<|tool_call:end|>", why: "Solar Open: closes one call of several" },
  { token: "<channel|>", why: "Gemma 4: closes the thought channel (think.ts)" },
  { token: "<|END_THINKING|>", why: "Cohere: closes the reasoning block (think.ts)" },
  { token: "[INST]", why: "Mistral: a user turn the model invents follows `</s>`, already a sentinel" }
]

interface Matcher {
  readonly sentinels: ReadonlyArray<string>
  /** Every proper, non-empty prefix of a sentinel: the suffixes worth holding back. */
  readonly prefixes: ReadonlySet<string>
  /** Flags, by code unit, the sentinels' first code units: only where one occurs can a sentinel start. */
  readonly firstCodes: Uint8Array
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
    firstCodes: nonEmpty.reduce((table, s) => {
      table[s.charCodeAt(0)] = 1
      return table
    }, new Uint8Array(0x10000)),
    longest: Math.max(0, ...nonEmpty.map((s) => s.length))
  }
}

// One matcher per distinct sentinel list (there is one per model): built once, not per response. A list seen
// before is found by itself (the policy hands out one list per model), without joining it.
const matchers = new Map<string, Matcher>()
const byList = new WeakMap<ReadonlyArray<string>, Matcher>()
const MAX_MATCHERS = 256

const makeMatcher = (sentinels: ReadonlyArray<string>): Matcher => {
  const seen = byList.get(sentinels)
  if (seen !== undefined) return seen
  const key = sentinels.join("\u0000")
  let matcher = matchers.get(key)
  if (matcher === undefined) {
    if (matchers.size >= MAX_MATCHERS) matchers.clear()
    matcher = buildMatcher(sentinels)
    matchers.set(key, matcher)
  }
  byList.set(sentinels, matcher)
  return matcher
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
 * starts. One pass over the text; only positions holding a sentinel's first code unit are tried (a chunk is a
 * token or a few, and the templates' end tokens start with a handful of different chars).
 */
const scan = (matcher: Matcher, text: string, from: number, hold: boolean): Scan => {
  const firsts = matcher.firstCodes
  for (let at = from; at < text.length; at++) {
    if (firsts[text.charCodeAt(at)] !== 1) continue
    if (sentinelAt(matcher, text, at)) return { _tag: "Ended", at }
    // A sentinel completed later in this suffix must wait: one starting here would come first.
    if (hold && text.length - at < matcher.longest && matcher.prefixes.has(text.slice(at))) {
      return { _tag: "Open", holdFrom: at }
    }
  }
  return { _tag: "Open", holdFrom: text.length }
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
