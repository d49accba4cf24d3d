import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { clip } from "../../common/clip.js"

/**
 * The upstream side of an OpenAI-compatible server: the streamed
 * `chat.completion.chunk` and the error body. Real servers (llama.cpp, vLLM,
 * Ollama, LM Studio, OpenAI) differ in which fields they send and send `null`
 * freely, so nearly everything is optional and nullable, and unknown keys are
 * ignored (on purpose: `timings`, `system_fingerprint`, ...).
 *
 * Every upstream event is read on the hot path, so chunks are decoded with
 * `JSON.parse` and plain field guards, not Schema (Schema-decoding each event
 * cost ~9 % of the relay's CPU, STYLE.md §6). Error bodies keep their Schema.
 */

export interface UpstreamToolCallDelta {
  readonly index?: number | null | undefined
  readonly id?: string | null | undefined
  readonly type?: string | null | undefined
  readonly function?: UpstreamFunctionDelta | null | undefined
}

export interface UpstreamFunctionDelta {
  readonly name?: string | null | undefined
  /** JSON text per the spec; a few servers send the object itself. */
  readonly arguments?: unknown
}

export interface UpstreamDelta {
  readonly role?: string | null | undefined
  /** A string per the spec; some servers send content parts (`[{type: "text", text}]`). */
  readonly content?: string | ReadonlyArray<unknown> | null | undefined
  readonly reasoning_content?: string | null | undefined
  readonly reasoning?: string | null | undefined
  /** OpenAI's refusal text: shown to the caller as content rather than lost. */
  readonly refusal?: string | null | undefined
  readonly tool_calls?: ReadonlyArray<UpstreamToolCallDelta> | null | undefined
}

export interface UpstreamTopLogprob {
  readonly token?: string | null | undefined
  readonly logprob?: number | null | undefined
  readonly bytes?: ReadonlyArray<number> | null | undefined
}

export interface UpstreamTokenLogprob extends UpstreamTopLogprob {
  readonly top_logprobs?: ReadonlyArray<UpstreamTopLogprob> | null | undefined
}

/** `choices[].logprobs`: the chunk's content tokens (refusal tokens are not read). */
export interface UpstreamLogprobs {
  readonly content?: ReadonlyArray<UpstreamTokenLogprob> | null | undefined
}

export interface UpstreamChoice {
  readonly index?: number | null | undefined
  readonly delta?: UpstreamDelta | null | undefined
  readonly logprobs?: UpstreamLogprobs | null | undefined
  readonly finish_reason?: string | null | undefined
}

export interface UpstreamUsage {
  readonly prompt_tokens?: number | null | undefined
  readonly completion_tokens?: number | null | undefined
  readonly total_tokens?: number | null | undefined
  readonly prompt_tokens_details?: { readonly cached_tokens?: number | null | undefined } | null | undefined
  readonly completion_tokens_details?: { readonly reasoning_tokens?: number | null | undefined } | null | undefined
}

const opt = <S extends Schema.Schema.Any>(schema: S) => Schema.optional(Schema.NullOr(schema))

/** `{"error": "text"}` or `{"error": {"message": ..., "type": ..., "code": ...}}`. */
export const UpstreamErrorDetail = Schema.Union(
  Schema.String,
  Schema.Struct({
    message: opt(Schema.String),
    type: opt(Schema.String),
    code: opt(Schema.Unknown)
  }).annotations({ parseOptions: { onExcessProperty: "ignore" } })
)
export type UpstreamErrorDetail = typeof UpstreamErrorDetail.Type

export interface UpstreamChunk {
  readonly id?: string | null | undefined
  readonly object?: string | null | undefined
  readonly model?: string | null | undefined
  readonly choices?: ReadonlyArray<UpstreamChoice> | null | undefined
  readonly usage?: UpstreamUsage | null | undefined
  /**
   * llama.cpp's `timings` (on its last chunk): only `cache_n` is kept, the prompt tokens its slot's cache held, for a
   * server whose usage does not say it (`prompt_tokens_details.cached_tokens`, newer llama-server).
   */
  readonly timings?: { readonly cache_n: number }
  readonly error?: UpstreamErrorDetail | null | undefined
  /** Older vLLM streams an unwrapped `{"object": "error", "message": ...}`. */
  readonly message?: string | null | undefined
}

/** The body of a non-2xx answer, in the shapes servers actually use. */
export const UpstreamErrorBody = Schema.Struct({
  error: opt(UpstreamErrorDetail),
  message: opt(Schema.String),
  // FastAPI (vLLM routes) answers `{"detail": "..."}`.
  detail: opt(Schema.Unknown)
}).annotations({ parseOptions: { onExcessProperty: "ignore" } })
export type UpstreamErrorBody = typeof UpstreamErrorBody.Type

/** One SSE event of the upstream stream, decoded. */
export type UpstreamInput =
  | { readonly _tag: "Chunk"; readonly chunk: UpstreamChunk }
  | { readonly _tag: "Done" }
  | { readonly _tag: "Malformed"; readonly message: string }

const MAX_QUOTED = 200

// ---------------------------------------------------------------------------
// chunk decoding: field guards

/** Where a chunk is wrong (a dotted path, built only on the way out of a failure) and how. */
class Wrong {
  constructor(readonly path: string, readonly message: string) {}
  within(key: string | number): Wrong {
    return new Wrong(`${key}.${this.path}`, this.message)
  }
}

type Json = Record<string, unknown>
type Mutable<T> = { -readonly [K in keyof T]: T[K] }

const isRecord = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const kind = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : typeof value

const wrong = (path: string, expected: string, value: unknown): Wrong =>
  new Wrong(path, `expected ${expected}, got ${kind(value)}`)

// Each reader copies a known key when it is there (so unknown keys are dropped) and answers a `Wrong` when its
// value has a type the mapper cannot use. Keys the mapper never reads are copied only when well-typed. Nothing
// is allocated for a well-formed chunk beyond the copies.

const readString = (from: Json, to: Json, key: string): Wrong | undefined => {
  const value = from[key]
  if (value === undefined) return undefined
  if (value !== null && typeof value !== "string") return wrong(key, "a string or null", value)
  to[key] = value
  return undefined
}

const readNumber = (from: Json, to: Json, key: string): Wrong | undefined => {
  const value = from[key]
  if (value === undefined) return undefined
  if (value !== null && typeof value !== "number") return wrong(key, "a number or null", value)
  to[key] = value
  return undefined
}

const copyIf = (from: Json, to: Json, key: string, type: "string" | "number"): void => {
  const value = from[key]
  if (value === null || typeof value === type) to[key] = value
}

/** `key` holds an object (or null), read by `read`. */
const readObject = (from: Json, to: Json, key: string, read: (value: Json) => object | Wrong): Wrong | undefined => {
  const value = from[key]
  if (value === undefined) return undefined
  if (value === null) {
    to[key] = null
    return undefined
  }
  if (!isRecord(value)) return wrong(key, "an object or null", value)
  const read_ = read(value)
  if (read_ instanceof Wrong) return read_.within(key)
  to[key] = read_
  return undefined
}

/** `key` holds an array (or null) of objects, each read by `read`. */
const readArray = (from: Json, to: Json, key: string, read: (value: Json) => object | Wrong): Wrong | undefined => {
  const value = from[key]
  if (value === undefined) return undefined
  if (value === null) {
    to[key] = null
    return undefined
  }
  if (!Array.isArray(value)) return wrong(key, "an array or null", value)
  const out: Array<object> = new Array(value.length)
  for (let i = 0; i < value.length; i++) {
    const item: unknown = value[i]
    if (!isRecord(item)) return wrong(`${key}.${i}`, "an object", item)
    const read_ = read(item)
    if (read_ instanceof Wrong) return read_.within(i).within(key)
    out[i] = read_
  }
  to[key] = out
  return undefined
}

const readFunction = (from: Json): UpstreamFunctionDelta | Wrong => {
  const to: Mutable<UpstreamFunctionDelta> & Json = {}
  const problem = readString(from, to, "name")
  if (problem !== undefined) return problem
  if (from["arguments"] !== undefined) to.arguments = from["arguments"]
  return to
}

const readToolCall = (from: Json): UpstreamToolCallDelta | Wrong => {
  const to: Mutable<UpstreamToolCallDelta> & Json = {}
  const problem = readNumber(from, to, "index") ??
    readString(from, to, "id") ??
    readObject(from, to, "function", readFunction)
  if (problem !== undefined) return problem
  copyIf(from, to, "type", "string")
  return to
}

const readDelta = (from: Json): UpstreamDelta | Wrong => {
  const to: Mutable<UpstreamDelta> & Json = {}
  const content = from["content"]
  if (content !== undefined) {
    if (content !== null && typeof content !== "string" && !Array.isArray(content)) {
      return wrong("content", "a string, an array of parts or null", content)
    }
    to.content = content
  }
  const problem = readString(from, to, "reasoning_content") ??
    readString(from, to, "reasoning") ??
    readString(from, to, "refusal") ??
    readArray(from, to, "tool_calls", readToolCall)
  if (problem !== undefined) return problem
  copyIf(from, to, "role", "string")
  return to
}

/** `bytes`: an array of numbers (UTF-8 bytes) or null. */
const readBytes = (from: Json, to: Json): Wrong | undefined => {
  const value = from["bytes"]
  if (value === undefined) return undefined
  if (value !== null && !(Array.isArray(value) && value.every((b) => typeof b === "number"))) {
    return wrong("bytes", "an array of numbers or null", value)
  }
  to["bytes"] = value
  return undefined
}

const readTopLogprob = (from: Json): UpstreamTopLogprob | Wrong => {
  const to: Mutable<UpstreamTopLogprob> & Json = {}
  return readString(from, to, "token") ?? readNumber(from, to, "logprob") ?? readBytes(from, to) ?? to
}

const readTokenLogprob = (from: Json): UpstreamTokenLogprob | Wrong => {
  const to: Mutable<UpstreamTokenLogprob> & Json = {}
  return readString(from, to, "token") ??
    readNumber(from, to, "logprob") ??
    readBytes(from, to) ??
    readArray(from, to, "top_logprobs", readTopLogprob) ??
    to
}

const readLogprobs = (from: Json): UpstreamLogprobs | Wrong => {
  const to: Mutable<UpstreamLogprobs> & Json = {}
  return readArray(from, to, "content", readTokenLogprob) ?? to
}

const readChoice = (from: Json): UpstreamChoice | Wrong => {
  const to: Mutable<UpstreamChoice> & Json = {}
  return readNumber(from, to, "index") ??
    readObject(from, to, "delta", readDelta) ??
    readObject(from, to, "logprobs", readLogprobs) ??
    readString(from, to, "finish_reason") ??
    to
}

const readCachedTokens = (from: Json): Json | Wrong => {
  const to: Json = {}
  return readNumber(from, to, "cached_tokens") ?? to
}

const readReasoningTokens = (from: Json): Json | Wrong => {
  const to: Json = {}
  return readNumber(from, to, "reasoning_tokens") ?? to
}

const readUsage = (from: Json): UpstreamUsage | Wrong => {
  const to: Mutable<UpstreamUsage> & Json = {}
  const problem = readNumber(from, to, "prompt_tokens") ??
    readNumber(from, to, "completion_tokens") ??
    readObject(from, to, "prompt_tokens_details", readCachedTokens) ??
    readObject(from, to, "completion_tokens_details", readReasoningTokens)
  if (problem !== undefined) return problem
  copyIf(from, to, "total_tokens", "number")
  return to
}

const readErrorDetail = (from: Json): Json | Wrong => {
  const to: Json = {}
  const problem = readString(from, to, "message")
  if (problem !== undefined) return problem
  copyIf(from, to, "type", "string")
  if (from["code"] !== undefined) to["code"] = from["code"]
  return to
}

/** `error`: a string or an error object. */
const readError = (from: Json, to: Json): Wrong | undefined => {
  const value = from["error"]
  if (typeof value === "string") {
    to["error"] = value
    return undefined
  }
  if (value !== undefined && value !== null && !isRecord(value)) {
    return wrong("error", "a string, an object or null", value)
  }
  return readObject(from, to, "error", readErrorDetail)
}

/**
 * A parsed JSON event → the chunk the mapper reads, or what is wrong with it
 * (`path: expected ..., got ...`). Unknown keys are dropped, nulls accepted.
 */
export const decodeChunk = (json: unknown): UpstreamChunk | string => {
  if (!isRecord(json)) return `chunk: expected an object, got ${kind(json)}`
  const to: Mutable<UpstreamChunk> & Json = {}
  const problem = readString(json, to, "object") ??
    readString(json, to, "model") ??
    readString(json, to, "message") ??
    readArray(json, to, "choices", readChoice) ??
    readObject(json, to, "usage", readUsage) ??
    readError(json, to)
  if (problem !== undefined) return `${problem.path}: ${problem.message}`
  copyIf(json, to, "id", "string")
  // Debugging figures, not the answer: one the edge cannot read is ignored rather than failing the answer.
  const timings = json["timings"]
  if (isRecord(timings) && typeof timings["cache_n"] === "number") to.timings = { cache_n: timings["cache_n"] }
  return to
}

const NOT_JSON: unique symbol = Symbol("NotJson")

// A plain try/catch: `Either.try` would allocate a closure and an Either for every upstream event.
const parseJsonFast = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return NOT_JSON
  }
}

const parseJson = (text: string): Either.Either<unknown, string> =>
  Either.try({
    try: (): unknown => JSON.parse(text),
    catch: (e) => (e instanceof Error ? e.message : String(e))
  })

const decodeErrorBody = Schema.decodeUnknownEither(UpstreamErrorBody)

/** The message of an error detail, if it has one. */
export const errorDetailMessage = (detail: UpstreamErrorDetail): string | undefined => {
  if (typeof detail === "string") return detail.trim() === "" ? undefined : detail
  const message = detail.message?.trim()
  return message === undefined || message === "" ? undefined : message
}

/** The error a chunk carries (`{"error": ...}` or an unwrapped vLLM error object), if any. */
export const chunkError = (chunk: UpstreamChunk): string | undefined => {
  if (chunk.error !== undefined && chunk.error !== null) return errorDetailMessage(chunk.error) ?? "unknown error"
  if (chunk.object === "error") return chunk.message ?? "unknown error"
  return undefined
}

const DONE: UpstreamInput = { _tag: "Done" }
const KEEP_ALIVE: UpstreamInput = { _tag: "Chunk", chunk: {} }

/**
 * Decodes the data of one SSE event. `event: error` (llama.cpp before 2025-09)
 * carries an error body, whatever its shape. Never throws, whatever the data.
 */
export const decodeEvent = (event: string | undefined, data: string): UpstreamInput => {
  const trimmed = data.trim()
  if (trimmed === "[DONE]") return DONE
  // An empty `data:` line is a keep-alive on some servers, not a chunk.
  if (trimmed === "") return KEEP_ALIVE
  if (event === "error") return { _tag: "Chunk", chunk: { error: errorBodyMessage(trimmed) } }
  const json = parseJsonFast(trimmed)
  if (json === NOT_JSON) {
    return { _tag: "Malformed", message: `upstream sent an event that is not JSON: ${clip(trimmed, MAX_QUOTED)}` }
  }
  const chunk = decodeChunk(json)
  if (typeof chunk === "string") {
    return { _tag: "Malformed", message: `upstream sent a malformed chunk (${clip(chunk, MAX_QUOTED)})` }
  }
  return { _tag: "Chunk", chunk }
}

/** The upstream's own error message from an error body, else the (trimmed, capped) body text. */
export const errorBodyMessage = (body: string, max = 500): string => {
  // `max` characters of the message, then `…`.
  const capped = (message: string) => clip(message, max + 1, "ellipsis")
  const text = body.trim()
  const fallback = text === "" ? "no error message" : capped(text)
  const json = parseJson(text)
  if (Either.isLeft(json)) return fallback
  if (typeof json.right === "string") return json.right.trim() === "" ? fallback : capped(json.right)
  const decoded = decodeErrorBody(json.right)
  if (Either.isLeft(decoded)) return fallback
  const { detail, error, message } = decoded.right
  const fromError = error === undefined || error === null ? undefined : errorDetailMessage(error)
  const fromDetail = typeof detail === "string" ? detail : undefined
  const found = fromError ?? message ?? fromDetail
  return found === undefined || found.trim() === "" ? fallback : capped(found)
}

/** The upstream's own error `code` (`context_length_exceeded`, ...) from an error body, when it is a short token. */
export const errorBodyCode = (body: string): string | undefined => {
  const json = parseJson(body.trim())
  if (Either.isLeft(json)) return undefined
  const decoded = decodeErrorBody(json.right)
  if (Either.isLeft(decoded)) return undefined
  const error = decoded.right.error
  const detail = typeof error === "object" && error !== null ? error : undefined
  if (detail !== undefined && typeof detail.code === "string" && CODE.test(detail.code)) return detail.code
  // A prompt past the context, in each server's words, is OpenAI's code (clients compact on it, not on any 400):
  // llama.cpp's `exceed_context_size_error` type, vLLM's "maximum context length" message (its code is a number).
  const message = typeof error === "string" ? error : detail?.message ?? decoded.right.message ?? undefined
  if (detail?.type === "exceed_context_size_error" || (message !== undefined && CONTEXT_OVERFLOW.test(message))) {
    return "context_length_exceeded"
  }
  return undefined
}

const CONTEXT_OVERFLOW = /maximum context length|exceeds? the (available )?context (size|length|window)|context length exceeded|context window exceeded|too many tokens in (the )?prompt/i

const CODE = /^[A-Za-z0-9_.-]{1,64}$/

/**
 * An answer's `Retry-After` (delta-seconds) or `retry-after-ms`, in whole seconds (at least 1), if it gave one
 * the client can use; an HTTP date is not read (the edge's clock is not the upstream's).
 */
export const retryAfterSeconds = (
  retryAfter: string | ReadonlyArray<string> | undefined,
  retryAfterMs: string | ReadonlyArray<string> | undefined
): number | undefined => {
  const seconds = headerNumber(retryAfter)
  if (seconds !== undefined) return Math.max(1, Math.ceil(seconds))
  const ms = headerNumber(retryAfterMs)
  return ms === undefined ? undefined : Math.max(1, Math.ceil(ms / 1000))
}

const headerNumber = (value: string | ReadonlyArray<string> | undefined): number | undefined => {
  const text = typeof value === "string" ? value : value?.[0]
  if (text === undefined || !/^\s*\d+(\.\d+)?\s*$/.test(text)) return undefined
  const n = Number(text)
  return Number.isFinite(n) && n <= 86_400 ? n : undefined
}

/** How much upstream text any client-facing message (or log line) may carry. */
export const MAX_UPSTREAM_TEXT_BYTES = 1024

const REDACTED = "[redacted]"
// `Bearer <token>` as an echoed `Authorization` header shows it, and anything that looks like an API key.
const BEARER = /\bBearer\s+(?!\[redacted\])[^\s"'`\\,;)}\]]+/gi
const KEY_LIKE = /\bsk-[A-Za-z0-9_-]{4,}/g

/**
 * Upstream text made fit to show: the edge's own upstream key (`secret`), any `Bearer <token>` and any
 * `sk-…`-looking token replaced by `[redacted]`, then clipped to `maxBytes` of UTF-8 (an ellipsis included).
 */
export const upstreamText = (text: string, secret: string | undefined, maxBytes = MAX_UPSTREAM_TEXT_BYTES): string =>
  clipBytes(scrubSecrets(text, secret), maxBytes)

export const scrubSecrets = (text: string, secret: string | undefined): string => {
  let out = secret !== undefined && secret.length >= 4 ? text.split(secret).join(REDACTED) : text
  out = out.replace(BEARER, `Bearer ${REDACTED}`)
  return out.replace(KEY_LIKE, REDACTED)
}

const utf8 = new TextEncoder()

/** At most `maxBytes` bytes of UTF-8, cut between characters, ending with `…` when cut. */
export const clipBytes = (text: string, maxBytes: number): string => {
  if (text.length * 3 <= maxBytes || utf8.encode(text).length <= maxBytes) return text
  const budget = maxBytes - 3 // the ellipsis
  let bytes = 0
  let end = 0
  for (const char of text) {
    const size = utf8.encode(char).length
    if (bytes + size > budget) break
    bytes += size
    end += char.length
  }
  return `${text.slice(0, end)}…`
}
