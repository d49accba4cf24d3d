import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

/**
 * The upstream side of an OpenAI-compatible server: the streamed
 * `chat.completion.chunk` and the error body. Real servers (llama.cpp, vLLM,
 * Ollama, LM Studio, OpenAI) differ in which fields they send and send `null`
 * freely, so nearly everything is optional and nullable, and unknown keys are
 * ignored (on purpose: `timings`, `system_fingerprint`, `logprobs`, ...).
 */

const lenient = { parseOptions: { onExcessProperty: "ignore" } } as const

const opt = <S extends Schema.Schema.Any>(schema: S) => Schema.optional(Schema.NullOr(schema))

export const UpstreamToolCallDelta = Schema.Struct({
  index: opt(Schema.Number),
  id: opt(Schema.String),
  type: opt(Schema.String),
  function: opt(
    Schema.Struct({
      name: opt(Schema.String),
      // JSON text per the spec; a few servers send the object itself.
      arguments: opt(Schema.Unknown)
    }).annotations(lenient)
  )
}).annotations(lenient)
export type UpstreamToolCallDelta = typeof UpstreamToolCallDelta.Type

export const UpstreamDelta = Schema.Struct({
  role: opt(Schema.String),
  // A string per the spec; some servers send content parts (`[{type: "text", text}]`).
  content: opt(Schema.Union(Schema.String, Schema.Array(Schema.Unknown))),
  reasoning_content: opt(Schema.String),
  reasoning: opt(Schema.String),
  // OpenAI's refusal text: shown to the caller as content rather than lost.
  refusal: opt(Schema.String),
  tool_calls: opt(Schema.Array(UpstreamToolCallDelta))
}).annotations(lenient)
export type UpstreamDelta = typeof UpstreamDelta.Type

export const UpstreamChoice = Schema.Struct({
  index: opt(Schema.Number),
  delta: opt(UpstreamDelta),
  finish_reason: opt(Schema.String)
}).annotations(lenient)
export type UpstreamChoice = typeof UpstreamChoice.Type

export const UpstreamUsage = Schema.Struct({
  prompt_tokens: opt(Schema.Number),
  completion_tokens: opt(Schema.Number),
  total_tokens: opt(Schema.Number),
  prompt_tokens_details: opt(Schema.Struct({ cached_tokens: opt(Schema.Number) }).annotations(lenient)),
  completion_tokens_details: opt(Schema.Struct({ reasoning_tokens: opt(Schema.Number) }).annotations(lenient))
}).annotations(lenient)
export type UpstreamUsage = typeof UpstreamUsage.Type

/** `{"error": "text"}` or `{"error": {"message": ..., "type": ..., "code": ...}}`. */
export const UpstreamErrorDetail = Schema.Union(
  Schema.String,
  Schema.Struct({
    message: opt(Schema.String),
    type: opt(Schema.String),
    code: opt(Schema.Unknown)
  }).annotations(lenient)
)
export type UpstreamErrorDetail = typeof UpstreamErrorDetail.Type

export const UpstreamChunk = Schema.Struct({
  id: opt(Schema.String),
  object: opt(Schema.String),
  model: opt(Schema.String),
  choices: opt(Schema.Array(UpstreamChoice)),
  usage: opt(UpstreamUsage),
  error: opt(UpstreamErrorDetail),
  // Older vLLM streams an unwrapped `{"object": "error", "message": ...}`.
  message: opt(Schema.String)
}).annotations(lenient)
export type UpstreamChunk = typeof UpstreamChunk.Type

/** The body of a non-2xx answer, in the shapes servers actually use. */
export const UpstreamErrorBody = Schema.Struct({
  error: opt(UpstreamErrorDetail),
  message: opt(Schema.String),
  // FastAPI (vLLM routes) answers `{"detail": "..."}`.
  detail: opt(Schema.Unknown)
}).annotations(lenient)
export type UpstreamErrorBody = typeof UpstreamErrorBody.Type

/** One SSE event of the upstream stream, decoded. */
export type UpstreamInput =
  | { readonly _tag: "Chunk"; readonly chunk: UpstreamChunk }
  | { readonly _tag: "Done" }
  | { readonly _tag: "Malformed"; readonly message: string }

const MAX_QUOTED = 200

export const clip = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max)}…` : text)

const decodeChunk = Schema.decodeUnknownEither(UpstreamChunk, { errors: "all" })
const decodeErrorBody = Schema.decodeUnknownEither(UpstreamErrorBody)

const parseJson = (text: string): Either.Either<unknown, string> =>
  Either.try({
    try: (): unknown => JSON.parse(text),
    catch: (e) => (e instanceof Error ? e.message : String(e))
  })

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

/**
 * Decodes the data of one SSE event. `event: error` (llama.cpp before 2025-09)
 * carries an error body, whatever its shape.
 */
export const decodeEvent = (event: string | undefined, data: string): UpstreamInput => {
  const trimmed = data.trim()
  if (trimmed === "[DONE]") return { _tag: "Done" }
  // An empty `data:` line is a keep-alive on some servers, not a chunk.
  if (trimmed === "") return { _tag: "Chunk", chunk: {} }
  if (event === "error") return { _tag: "Chunk", chunk: { error: errorBodyMessage(trimmed) } }
  const json = parseJson(trimmed)
  if (Either.isLeft(json)) {
    return { _tag: "Malformed", message: `upstream sent an event that is not JSON: ${clip(trimmed, MAX_QUOTED)}` }
  }
  const chunk = decodeChunk(json.right)
  if (Either.isLeft(chunk)) {
    const issues = ParseResult.ArrayFormatter.formatErrorSync(chunk.left)
      .map((issue) => `${issue.path.length === 0 ? "chunk" : issue.path.map(String).join(".")}: ${issue.message}`)
      .join("; ")
    return { _tag: "Malformed", message: `upstream sent a malformed chunk (${clip(issues, MAX_QUOTED)})` }
  }
  return { _tag: "Chunk", chunk: chunk.right }
}

/** The upstream's own error message from an error body, else the (trimmed, capped) body text. */
export const errorBodyMessage = (body: string, max = 500): string => {
  const text = body.trim()
  const fallback = text === "" ? "no error message" : clip(text, max)
  const json = parseJson(text)
  if (Either.isLeft(json)) return fallback
  if (typeof json.right === "string") return json.right.trim() === "" ? fallback : clip(json.right, max)
  const decoded = decodeErrorBody(json.right)
  if (Either.isLeft(decoded)) return fallback
  const { detail, error, message } = decoded.right
  const fromError = error === undefined || error === null ? undefined : errorDetailMessage(error)
  const fromDetail = typeof detail === "string" ? detail : undefined
  const found = fromError ?? message ?? fromDetail
  return found === undefined || found.trim() === "" ? fallback : clip(found, max)
}
