import * as Schema from "effect/Schema"

/**
 * What the edge asks a node to run. Messages and tools keep the OpenAI wire
 * shape (snake_case) because providers pass them on to OpenAI-compatible
 * upstreams as they are; everything else is the edge's own model.
 */

/** A content part (`text`, `image_url`, `input_audio`, ...); unknown keys are kept. */
export const ContentPart = Schema.Struct(
  { type: Schema.String },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)
export type ContentPart = typeof ContentPart.Type

export const MessageContent = Schema.Union(Schema.String, Schema.Array(ContentPart), Schema.Null)
export type MessageContent = typeof MessageContent.Type

export const MessageToolCall = Schema.Struct({
  id: Schema.String,
  type: Schema.optional(Schema.Literal("function")),
  function: Schema.Struct({ name: Schema.String, arguments: Schema.String })
})
export type MessageToolCall = typeof MessageToolCall.Type

export const ChatMessage = Schema.Struct({
  role: Schema.Literal("system", "developer", "user", "assistant", "tool"),
  content: Schema.optional(MessageContent),
  name: Schema.optional(Schema.String),
  tool_calls: Schema.optional(Schema.Array(MessageToolCall)),
  tool_call_id: Schema.optional(Schema.String),
  reasoning_content: Schema.optional(Schema.String)
})
export type ChatMessage = typeof ChatMessage.Type

export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export type JsonObject = typeof JsonObject.Type

export const FunctionTool = Schema.Struct({
  type: Schema.Literal("function"),
  function: Schema.Struct({
    name: Schema.String.pipe(Schema.minLength(1)),
    description: Schema.optional(Schema.String),
    parameters: Schema.optional(JsonObject),
    strict: Schema.optional(Schema.NullOr(Schema.Boolean))
  })
})
export type FunctionTool = typeof FunctionTool.Type

export const ToolChoice = Schema.Union(
  Schema.Literal("none", "auto", "required"),
  Schema.Struct({
    type: Schema.Literal("function"),
    function: Schema.Struct({ name: Schema.String })
  })
)
export type ToolChoice = typeof ToolChoice.Type

/** The request fields that are an upstream's own output constraints: passed on as sent, never interpreted. */
export const UPSTREAM_CONSTRAINTS = [
  "grammar",
  "json_schema",
  "guided_json",
  "guided_regex",
  "guided_choice",
  "guided_grammar",
  "guided_decoding_backend",
  "structured_outputs"
] as const

/** Sampling and output parameters passed through to the provider. */
export const SamplingParams = Schema.Struct({
  temperature: Schema.optional(Schema.Number),
  topP: Schema.optional(Schema.Number),
  maxTokens: Schema.optional(Schema.Number),
  stop: Schema.optional(Schema.Union(Schema.String, Schema.Array(Schema.String))),
  seed: Schema.optional(Schema.Number),
  presencePenalty: Schema.optional(Schema.Number),
  frequencyPenalty: Schema.optional(Schema.Number),
  responseFormat: Schema.optional(JsonObject),
  /** The caller's name for the token limit, kept so the upstream gets the field the caller sent. */
  maxTokensField: Schema.optional(Schema.Literal("max_tokens", "max_completion_tokens")),
  reasoningEffort: Schema.optional(Schema.String),
  user: Schema.optional(Schema.String),
  logitBias: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Number })),
  logprobs: Schema.optional(Schema.Boolean),
  topLogprobs: Schema.optional(Schema.Number),
  /**
   * A constraint the caller sent in its upstream's own terms, passed on as sent: llama.cpp's `grammar` and
   * `json_schema`, vLLM's `guided_*` and `structured_outputs` (`UPSTREAM_CONSTRAINTS`).
   */
  constraints: Schema.optional(JsonObject)
})
export type SamplingParams = typeof SamplingParams.Type

export const SubmitRunRequest = Schema.Struct({
  /** The configured model id the caller asked for. */
  model: Schema.String,
  messages: Schema.Array(ChatMessage),
  tools: Schema.Array(FunctionTool),
  toolChoice: Schema.optional(ToolChoice),
  parallelToolCalls: Schema.optional(Schema.Boolean),
  sampling: SamplingParams,
  /**
   * The caller wants the whole answer at once (a non-stream request): a provider may ask its upstream for one
   * answer instead of a stream (cheaper to read), and then says so through `RunSink.awaitWhole`.
   */
  wholeAnswer: Schema.optional(Schema.Boolean),
  /**
   * On a replay of an answer whose call to this tool was invalid: a provider whose upstream can constrain its output
   * constrains the replay to a valid call of this tool; one that cannot replays the request exactly.
   */
  replayTool: Schema.optional(Schema.String),
  /**
   * The W3C `traceparent` of the span this run belongs to (the edge's attempt span), when the edge traces: the
   * node continues it and a provider sends it to its upstream, so the upstream's spans join the request's trace.
   */
  traceparent: Schema.optional(Schema.String),
  /** Trace flags, and on a retry `attempt`, `failed_run_id` and `reason`. */
  metadata: Schema.Record({ key: Schema.String, value: Schema.String })
})
export type SubmitRunRequest = typeof SubmitRunRequest.Type
