import * as Schema from "effect/Schema"

/**
 * The Chat Completions response objects, exactly as the edge writes them (`render.ts` builds values of these
 * types, so tsc holds the renderer to them): the non-stream `chat.completion` and the streamed
 * `chat.completion.chunk`. Decoding refuses fields these schemas do not name (`onExcessProperty: "error"`), so a
 * body that decodes has nothing the schemas leave out.
 */

const strict = { parseOptions: { onExcessProperty: "error" } } as const

/** One alternative token of `top_logprobs`. */
export const TopLogprob = Schema.Struct({
  token: Schema.String,
  logprob: Schema.Number,
  bytes: Schema.NullOr(Schema.Array(Schema.Number))
})
export type TopLogprob = typeof TopLogprob.Type

/** OpenAI's `logprobs.content[]` entry. */
export const TokenLogprob = Schema.Struct({
  token: Schema.String,
  logprob: Schema.Number,
  bytes: Schema.NullOr(Schema.Array(Schema.Number)),
  top_logprobs: Schema.Array(TopLogprob)
})
export type TokenLogprob = typeof TokenLogprob.Type

/** A choice's `logprobs` when the run carried them (`null` otherwise). */
export const ChoiceLogprobs = Schema.Struct({
  content: Schema.Array(TokenLogprob),
  refusal: Schema.Null
})
export type ChoiceLogprobs = typeof ChoiceLogprobs.Type

export const CompletionUsage = Schema.Struct({
  prompt_tokens: Schema.Number,
  completion_tokens: Schema.Number,
  total_tokens: Schema.Number,
  /** Present when the upstream reported cached input tokens. */
  prompt_tokens_details: Schema.optional(Schema.Struct({ cached_tokens: Schema.Number })),
  /** Present when the upstream reported reasoning tokens. */
  completion_tokens_details: Schema.optional(Schema.Struct({ reasoning_tokens: Schema.Number }))
})
export type CompletionUsage = typeof CompletionUsage.Type

export const ToolCallFunction = Schema.Struct({
  name: Schema.String,
  /** The arguments as a JSON text. */
  arguments: Schema.String
})

export const ToolCall = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("function"),
  function: ToolCallFunction
})
export type ToolCall = typeof ToolCall.Type

/**
 * A streamed tool call. The edge sends each call whole, in one delta (its calls are resolved and, when strict,
 * validated at the end of the run), so unlike OpenAI's own stream its id, type, name and arguments are always there.
 */
export const ToolCallDelta = Schema.Struct({
  index: Schema.Number,
  id: Schema.String,
  type: Schema.Literal("function"),
  function: ToolCallFunction
})
export type ToolCallDelta = typeof ToolCallDelta.Type

/**
 * Reasoning text, under the field(s) the request's policy names (`reasoning_content` by default, `reasoning`,
 * or both with the same text: `metadata.iop_reasoning_field`).
 */
const reasoningFields = {
  reasoning_content: Schema.optional(Schema.String),
  reasoning: Schema.optional(Schema.String)
}

export const ChatCompletionMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  /** `null` when the answer is tool calls alone. */
  content: Schema.NullOr(Schema.String),
  refusal: Schema.Null,
  ...reasoningFields,
  tool_calls: Schema.optional(Schema.Array(ToolCall))
})
export type ChatCompletionMessage = typeof ChatCompletionMessage.Type

export const ChatCompletionChoice = Schema.Struct({
  index: Schema.Number,
  message: ChatCompletionMessage,
  /** An object when the request asked for `logprobs`, `null` otherwise. */
  logprobs: Schema.NullOr(ChoiceLogprobs),
  /** `stop`, `length`, `tool_calls`, or what the upstream said. */
  finish_reason: Schema.String
})
export type ChatCompletionChoice = typeof ChatCompletionChoice.Type

/** The non-stream response: `object: "chat.completion"`. */
export const ChatCompletion = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("chat.completion"),
  /** Unix seconds. */
  created: Schema.Number,
  model: Schema.String,
  choices: Schema.Array(ChatCompletionChoice),
  /** Absent when the run reported no usage. */
  usage: Schema.optional(CompletionUsage)
}).annotations({ identifier: "ChatCompletion", ...strict })
export type ChatCompletion = typeof ChatCompletion.Type

/**
 * What one chunk adds. The first chunk is `{ role: "assistant", content: "" }`; then each chunk carries text
 * (`content`), reasoning, or the tool calls; the finish chunk's delta is empty.
 */
export const ChunkDelta = Schema.Struct({
  role: Schema.optional(Schema.Literal("assistant")),
  content: Schema.optional(Schema.String),
  ...reasoningFields,
  tool_calls: Schema.optional(Schema.Array(ToolCallDelta))
})
export type ChunkDelta = typeof ChunkDelta.Type

export const ChunkChoice = Schema.Struct({
  index: Schema.Number,
  delta: ChunkDelta,
  /** The entries of this chunk's content when the run carried them, `null` otherwise. */
  logprobs: Schema.NullOr(ChoiceLogprobs),
  /** `null` but on the finish chunk. */
  finish_reason: Schema.NullOr(Schema.String)
})
export type ChunkChoice = typeof ChunkChoice.Type

/**
 * A streamed chunk: `object: "chat.completion.chunk"`. With `stream_options.include_usage` the finish chunk is
 * followed by one with no choices and `usage` (`null` when the run reported none).
 */
export const ChatCompletionChunk = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("chat.completion.chunk"),
  /** Unix seconds. */
  created: Schema.Number,
  model: Schema.String,
  choices: Schema.Array(ChunkChoice),
  usage: Schema.optional(Schema.NullOr(CompletionUsage))
}).annotations({ identifier: "ChatCompletionChunk", ...strict })
export type ChatCompletionChunk = typeof ChatCompletionChunk.Type
