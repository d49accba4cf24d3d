import * as Schema from "effect/Schema"
import { JsonObject } from "../../protocol/SubmitRunRequest.js"

/**
 * The Anthropic Messages request, as far as the edge honours it (docs/dialects-messages.md). Unknown fields are
 * accepted and ignored (Schema's default), so `cache_control`, `citations`, `context_management`, `container`,
 * `mcp_servers`, `service_tier` and fields Anthropic adds later do not break a request.
 */

const Optional = <S extends Schema.Schema.Any>(s: S) => Schema.optional(Schema.NullOr(s))

export const TextBlock = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
export type TextBlock = typeof TextBlock.Type

export const ImageSource = Schema.Union(
  Schema.Struct({ type: Schema.Literal("base64"), media_type: Schema.String, data: Schema.String }),
  Schema.Struct({ type: Schema.Literal("url"), url: Schema.String }),
  Schema.Struct({ type: Schema.Literal("file"), file_id: Schema.String })
)
export type ImageSource = typeof ImageSource.Type

export const ImageBlock = Schema.Struct({ type: Schema.Literal("image"), source: ImageSource })
export type ImageBlock = typeof ImageBlock.Type

export const DocumentSource = Schema.Union(
  Schema.Struct({ type: Schema.Literal("base64"), media_type: Schema.String, data: Schema.String }),
  Schema.Struct({ type: Schema.Literal("text"), data: Schema.String }),
  Schema.Struct({ type: Schema.Literal("content"), content: Schema.Union(Schema.String, Schema.Array(TextBlock)) }),
  Schema.Struct({ type: Schema.Literal("url"), url: Schema.String }),
  Schema.Struct({ type: Schema.Literal("file"), file_id: Schema.String })
)
export type DocumentSource = typeof DocumentSource.Type

export const DocumentBlock = Schema.Struct({
  type: Schema.Literal("document"),
  source: DocumentSource,
  title: Optional(Schema.String)
})
export type DocumentBlock = typeof DocumentBlock.Type

export const ToolUseBlock = Schema.Struct({
  type: Schema.Literal("tool_use"),
  id: Schema.String.pipe(Schema.minLength(1)),
  name: Schema.String.pipe(Schema.minLength(1)),
  input: JsonObject
})
export type ToolUseBlock = typeof ToolUseBlock.Type

/** The block types the translator reads; any other type is accepted and left out (a debug note). */
export const KNOWN_BLOCKS: ReadonlySet<string> = new Set([
  "text",
  "image",
  "document",
  "tool_use",
  "tool_result",
  "thinking",
  "redacted_thinking"
])

/** A block of a type the edge does not know (server tool blocks, search results, ...): left out of the run. */
export const OtherBlock = Schema.Struct({
  type: Schema.String.pipe(
    Schema.filter((t) => !KNOWN_BLOCKS.has(t), { message: () => "a block of this type needs its own fields" })
  )
})
export type OtherBlock = typeof OtherBlock.Type

export const ToolResultBlock = Schema.Struct({
  type: Schema.Literal("tool_result"),
  tool_use_id: Schema.String.pipe(Schema.minLength(1)),
  content: Optional(Schema.Union(Schema.String, Schema.Array(Schema.Union(TextBlock, ImageBlock, DocumentBlock, OtherBlock)))),
  is_error: Optional(Schema.Boolean)
})
export type ToolResultBlock = typeof ToolResultBlock.Type

export const ThinkingBlock = Schema.Struct({
  type: Schema.Literal("thinking"),
  thinking: Schema.String,
  signature: Optional(Schema.String)
})
export type ThinkingBlock = typeof ThinkingBlock.Type

export const RedactedThinkingBlock = Schema.Struct({ type: Schema.Literal("redacted_thinking") })
export type RedactedThinkingBlock = typeof RedactedThinkingBlock.Type

export type KnownBlock =
  | TextBlock
  | ImageBlock
  | DocumentBlock
  | ToolUseBlock
  | ToolResultBlock
  | ThinkingBlock
  | RedactedThinkingBlock

/** A block the translator reads (narrows away `OtherBlock`, whose `type` is any other string). */
export const isKnownBlock = (block: KnownBlock | OtherBlock): block is KnownBlock => KNOWN_BLOCKS.has(block.type)

export const ContentBlock = Schema.Union(
  TextBlock,
  ImageBlock,
  DocumentBlock,
  ToolUseBlock,
  ToolResultBlock,
  ThinkingBlock,
  RedactedThinkingBlock,
  OtherBlock
)
export type ContentBlock = typeof ContentBlock.Type

export const Message = Schema.Struct({
  // `system` mid-history: Claude Code sends `{role: "system", content: "..."}` entries between turns
  // (anthropic-beta mid-conversation-system).
  role: Schema.Literal("user", "assistant", "system"),
  content: Schema.Union(Schema.String, Schema.Array(ContentBlock))
})
export type Message = typeof Message.Type

/** A tool: `type` absent or `custom` is the caller's own tool; any other type is one of Anthropic's server tools. */
export const Tool = Schema.Struct({
  type: Optional(Schema.String),
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256)),
  description: Optional(Schema.String),
  input_schema: Optional(JsonObject)
})
export type Tool = typeof Tool.Type

const parallel = { disable_parallel_tool_use: Optional(Schema.Boolean) }

export const ToolChoice = Schema.Union(
  Schema.Struct({ type: Schema.Literal("auto"), ...parallel }),
  Schema.Struct({ type: Schema.Literal("any"), ...parallel }),
  Schema.Struct({ type: Schema.Literal("tool"), name: Schema.String.pipe(Schema.minLength(1)), ...parallel }),
  Schema.Struct({ type: Schema.Literal("none") })
)
export type ToolChoice = typeof ToolChoice.Type

/** `enabled` (with a budget) and `adaptive` show reasoning; `disabled`, any other type or none hide it. */
export const Thinking = Schema.Struct({
  type: Schema.String.pipe(Schema.maxLength(64)),
  budget_tokens: Optional(Schema.Int.pipe(Schema.nonNegative()))
})
export type Thinking = typeof Thinking.Type

/** Claude Code's `output_config`: a `json_schema` format is honoured, `effort` is not forwarded. */
export const OutputConfig = Schema.Struct({
  format: Optional(Schema.Struct({ type: Schema.String.pipe(Schema.maxLength(64)), schema: Optional(JsonObject) }))
})

/** The fields `POST /v1/messages/count_tokens` reads: a Messages request without `max_tokens`. */
const fields = {
  model: Schema.String.pipe(Schema.minLength(1)),
  messages: Schema.NonEmptyArray(Message),
  system: Optional(Schema.Union(Schema.String, Schema.Array(TextBlock))),
  tools: Optional(Schema.Array(Tool)),
  tool_choice: Optional(ToolChoice),
  thinking: Optional(Thinking)
}

export const CountTokensRequest = Schema.Struct(fields)
export type CountTokensRequest = typeof CountTokensRequest.Type

export const MessagesRequest = Schema.Struct({
  ...fields,
  // Required, as Anthropic requires it.
  max_tokens: Schema.Int.pipe(Schema.positive()),
  stream: Optional(Schema.Boolean),
  stop_sequences: Optional(Schema.Array(Schema.String)),
  temperature: Optional(Schema.Number.pipe(Schema.between(0, 1))),
  top_p: Optional(Schema.Number.pipe(Schema.between(0, 1))),
  // Accepted, not forwarded: OpenAI-compatible Chat Completions has no `top_k`.
  top_k: Optional(Schema.Int.pipe(Schema.nonNegative())),
  metadata: Optional(Schema.Struct({ user_id: Optional(Schema.String) })),
  output_config: Optional(OutputConfig)
})
export type MessagesRequest = typeof MessagesRequest.Type
