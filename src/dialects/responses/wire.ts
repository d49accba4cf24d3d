import * as Schema from "effect/Schema"
import { JsonObject } from "../../protocol/SubmitRunRequest.js"

/**
 * The OpenAI Responses request (`POST /v1/responses`), as far as the edge reads it. Unknown fields are accepted
 * and ignored (Schema's default); `null` is accepted wherever clients send it for "unset".
 *
 * `input` items and `tools` are decoded in two steps (request.ts): first only their `type`, then each by the schema
 * of its type. One union over every item type would report a bad `function_call` as a bad `message` (the union's
 * errors all sit at the same depth); and item and tool types the edge does not forward (Codex sends several every
 * turn) must still decode.
 */

const Nullable = <S extends Schema.Schema.Any>(s: S) => Schema.optional(Schema.NullOr(s))
const NonNegativeInt = Schema.Int.pipe(Schema.nonNegative())

/** What the first step reads of a tool (or a tool choice): its `type`; the rest is decoded by type. */
const Typed = Schema.Struct({ type: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.Unknown }))
export type Typed = typeof Typed.Type

/** What the first step reads of an input item: its `type`, absent for a message. */
const ItemHead = Schema.Struct(
  { type: Schema.optional(Schema.String) },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)
export type ItemHead = typeof ItemHead.Type

// ---------------------------------------------------------------------------
// content parts

export const InputText = Schema.Struct({ type: Schema.Literal("input_text"), text: Schema.String })
export const OutputText = Schema.Struct({ type: Schema.Literal("output_text"), text: Schema.String })
export const InputImage = Schema.Struct({
  type: Schema.Literal("input_image"),
  image_url: Nullable(Schema.String),
  file_id: Nullable(Schema.String),
  detail: Nullable(Schema.String.pipe(Schema.maxLength(16)))
})
export const InputFile = Schema.Struct({
  type: Schema.Literal("input_file"),
  file_data: Nullable(Schema.String),
  file_id: Nullable(Schema.String),
  file_url: Nullable(Schema.String),
  filename: Nullable(Schema.String)
})
export const Refusal = Schema.Struct({ type: Schema.Literal("refusal"), refusal: Schema.String })

/** Every content part of a message or a tool output (discriminated by a required `type`: errors name the part). */
export const ContentPart = Schema.Union(InputText, OutputText, InputImage, InputFile, Refusal)
export type ContentPart = typeof ContentPart.Type

export const Content = Schema.Union(Schema.String, Schema.Array(ContentPart))
export type Content = typeof Content.Type

// ---------------------------------------------------------------------------
// input items

export const MessageItem = Schema.Struct({
  type: Schema.optional(Schema.Literal("message")),
  role: Schema.Literal("user", "assistant", "system", "developer"),
  content: Content
})
export type MessageItem = typeof MessageItem.Type

export const FunctionCallItem = Schema.Struct({
  type: Schema.Literal("function_call"),
  call_id: Schema.String.pipe(Schema.minLength(1)),
  name: Schema.String.pipe(Schema.minLength(1)),
  arguments: Schema.String
})
export type FunctionCallItem = typeof FunctionCallItem.Type

export const FunctionCallOutputItem = Schema.Struct({
  type: Schema.Literal("function_call_output"),
  call_id: Schema.String.pipe(Schema.minLength(1)),
  output: Content
})
export type FunctionCallOutputItem = typeof FunctionCallOutputItem.Type

/** A freeform tool's call (Codex's `apply_patch` on OpenAI's models): kept in the history as a function call. */
export const CustomToolCallItem = Schema.Struct({
  type: Schema.Literal("custom_tool_call"),
  call_id: Schema.String.pipe(Schema.minLength(1)),
  name: Schema.String.pipe(Schema.minLength(1)),
  input: Schema.String
})
export type CustomToolCallItem = typeof CustomToolCallItem.Type

export const CustomToolCallOutputItem = Schema.Struct({
  type: Schema.Literal("custom_tool_call_output"),
  call_id: Schema.String.pipe(Schema.minLength(1)),
  output: Content
})
export type CustomToolCallOutputItem = typeof CustomToolCallOutputItem.Type

const TextPart = Schema.Struct({ text: Schema.String })

/** A reference to an item the edge stored (an earlier response's input or output item), by its id. */
export const ItemReference = Schema.Struct({
  type: Schema.optional(Schema.Literal("item_reference")),
  id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256))
})

/** A reasoning item a client sends back: its summary (or its reasoning text) goes back to the model. */
export const ReasoningItem = Schema.Struct({
  type: Schema.Literal("reasoning"),
  summary: Nullable(Schema.Array(TextPart)),
  content: Nullable(Schema.Array(TextPart))
})
export type ReasoningItem = typeof ReasoningItem.Type

// ---------------------------------------------------------------------------
// tools

export const FunctionToolWire = Schema.Struct({
  type: Schema.Literal("function"),
  name: Schema.String.pipe(Schema.minLength(1)),
  description: Nullable(Schema.String),
  parameters: Nullable(JsonObject),
  strict: Nullable(Schema.Boolean)
})
export type FunctionToolWire = typeof FunctionToolWire.Type

export const ToolChoiceWire = Schema.Union(Schema.Literal("auto", "none", "required"), Typed)
export type ToolChoiceWire = typeof ToolChoiceWire.Type

export const ToolChoiceFunction = Schema.Struct({ type: Schema.Literal("function"), name: Schema.String })
export const ToolChoiceAllowed = Schema.Struct({
  type: Schema.Literal("allowed_tools"),
  mode: Schema.Literal("auto", "required"),
  tools: Schema.Array(Typed)
})

// ---------------------------------------------------------------------------
// text format

export const TextFormat = Schema.Union(
  Schema.Struct({ type: Schema.Literal("text") }),
  Schema.Struct({ type: Schema.Literal("json_object") }),
  Schema.Struct({
    type: Schema.Literal("json_schema"),
    name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64)),
    schema: JsonObject,
    description: Nullable(Schema.String),
    strict: Nullable(Schema.Boolean)
  })
)
export type TextFormat = typeof TextFormat.Type

// ---------------------------------------------------------------------------
// the request

export const ResponsesRequestWire = Schema.Struct({
  model: Schema.String.pipe(Schema.minLength(1)),
  input: Schema.Union(Schema.String, Schema.Array(ItemHead)),
  instructions: Nullable(Schema.String),
  tools: Nullable(Schema.Array(Typed)),
  tool_choice: Nullable(ToolChoiceWire),
  parallel_tool_calls: Nullable(Schema.Boolean),
  max_output_tokens: Nullable(NonNegativeInt),
  temperature: Nullable(Schema.Number.pipe(Schema.between(0, 2))),
  top_p: Nullable(Schema.Number.pipe(Schema.between(0, 1))),
  reasoning: Nullable(Schema.Struct({
    // Passed to the upstream as `reasoning_effort`, as sent (servers that do not know a value ignore it or say so).
    effort: Nullable(Schema.String.pipe(Schema.maxLength(32))),
    summary: Nullable(Schema.Literal("auto", "concise", "detailed")),
    generate_summary: Nullable(Schema.Literal("auto", "concise", "detailed"))
  })),
  text: Nullable(Schema.Struct({
    format: Nullable(TextFormat),
    verbosity: Nullable(Schema.Literal("low", "medium", "high"))
  })),
  metadata: Nullable(Schema.Record({ key: Schema.String, value: Schema.String })),
  stream: Nullable(Schema.Boolean),
  store: Nullable(Schema.Boolean),
  user: Nullable(Schema.String.pipe(Schema.maxLength(256))),
  include: Nullable(Schema.Array(Schema.String)),
  prompt_cache_key: Nullable(Schema.String),
  service_tier: Nullable(Schema.String),
  truncation: Nullable(Schema.Literal("auto", "disabled")),
  // Resolved from the response store (StoredResponses) before the request is translated.
  previous_response_id: Nullable(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256))),
  // Refused when set (request.ts): they need state the edge does not keep, or token log probabilities.
  conversation: Nullable(Schema.Unknown),
  prompt: Nullable(Schema.Unknown),
  background: Nullable(Schema.Boolean),
  top_logprobs: Nullable(Schema.Int.pipe(Schema.between(0, 20)))
})
export type ResponsesRequestWire = typeof ResponsesRequestWire.Type

/** An input item, decoded by its type; `Other` is a type the edge does not forward (dropped, logged). */
export type InputItem =
  | { readonly _tag: "Message"; readonly item: MessageItem }
  | { readonly _tag: "FunctionCall"; readonly item: FunctionCallItem }
  | { readonly _tag: "FunctionCallOutput"; readonly item: FunctionCallOutputItem }
  | { readonly _tag: "CustomToolCall"; readonly item: CustomToolCallItem }
  | { readonly _tag: "CustomToolCallOutput"; readonly item: CustomToolCallOutputItem }
  | { readonly _tag: "Reasoning"; readonly item: ReasoningItem }
  /** An `item_reference`: replaced by the item it names before the translation (`StoredResponses.resolve`). */
  | { readonly _tag: "Reference"; readonly id: string }
  | { readonly _tag: "Other"; readonly type: string }

/** A tool, decoded by its type; `Other` (web_search, local_shell, custom, namespace, mcp, ...) is not forwarded. */
export type ToolItem =
  | { readonly _tag: "Function"; readonly tool: FunctionToolWire }
  | { readonly _tag: "Other"; readonly type: string }

/** An input item as the client sent it (what a stored response keeps and lists). */
export type RawItem = Readonly<Record<string, unknown>>

/** The decoded request: the wire fields, with `input` and `tools` decoded item by item. */
export interface ResponsesRequest extends Omit<ResponsesRequestWire, "input" | "tools"> {
  readonly input: ReadonlyArray<InputItem>
  /** `input` as sent, item for item (a string input as one user message). */
  readonly rawInput: ReadonlyArray<RawItem>
  readonly tools: ReadonlyArray<ToolItem>
  /**
   * What the response store made of it (`StoredResponses.resolve`): its references resolved, and whether its
   * response is kept (`store` as answered). Absent: it went through no store (references are refused, nothing kept).
   */
  readonly stored?: { readonly keep: boolean }
}
