import * as Schema from "effect/Schema"
import { ChatMessage, FunctionTool, JsonObject, ToolChoice } from "../../protocol/SubmitRunRequest.js"

/**
 * The OpenAI Chat Completions request, as far as the edge honours it.
 * Unknown fields are accepted and ignored (Schema's default); `null` is
 * accepted wherever clients commonly send it for "unset".
 */

const Nullable = <S extends Schema.Schema.Any>(s: S) => Schema.optional(Schema.NullOr(s))
const NonNegativeInt = Schema.Int.pipe(Schema.nonNegative())

export const ChatCompletionRequest = Schema.Struct({
  model: Schema.String.pipe(Schema.minLength(1)),
  messages: Schema.NonEmptyArray(ChatMessage),
  stream: Nullable(Schema.Boolean),
  stream_options: Nullable(Schema.Struct({ include_usage: Nullable(Schema.Boolean) })),
  tools: Nullable(Schema.Array(FunctionTool)),
  tool_choice: Nullable(ToolChoice),
  parallel_tool_calls: Nullable(Schema.Boolean),
  temperature: Nullable(Schema.Number.pipe(Schema.between(0, 2))),
  top_p: Nullable(Schema.Number.pipe(Schema.between(0, 1))),
  max_tokens: Nullable(NonNegativeInt),
  max_completion_tokens: Nullable(NonNegativeInt),
  stop: Nullable(Schema.Union(Schema.String, Schema.Array(Schema.String).pipe(Schema.maxItems(16)))),
  seed: Nullable(Schema.Int),
  presence_penalty: Nullable(Schema.Number.pipe(Schema.between(-2, 2))),
  frequency_penalty: Nullable(Schema.Number.pipe(Schema.between(-2, 2))),
  response_format: Nullable(JsonObject),
  // Passed to the upstream as sent (OpenCode and pi send `reasoning_effort`; servers that do not know a field ignore it).
  reasoning_effort: Nullable(Schema.String.pipe(Schema.maxLength(32))),
  user: Nullable(Schema.String.pipe(Schema.maxLength(256))),
  logit_bias: Nullable(Schema.Record({ key: Schema.String, value: Schema.Number.pipe(Schema.between(-100, 100)) })),
  // Token log probabilities are not relayed yet: asking for them is refused rather than silently answered null.
  logprobs: Nullable(Schema.Boolean),
  top_logprobs: Nullable(Schema.Int.pipe(Schema.between(0, 20))),
  n: Nullable(Schema.Literal(1)),
  metadata: Nullable(Schema.Record({ key: Schema.String, value: Schema.String })),
  // An upstream's own constraints (llama.cpp, vLLM), passed on as sent: see UPSTREAM_CONSTRAINTS.
  grammar: Nullable(Schema.String),
  json_schema: Nullable(JsonObject),
  guided_json: Nullable(Schema.Union(JsonObject, Schema.String)),
  guided_regex: Nullable(Schema.String),
  guided_choice: Nullable(Schema.Array(Schema.String)),
  guided_grammar: Nullable(Schema.String),
  guided_decoding_backend: Nullable(Schema.String),
  structured_outputs: Nullable(JsonObject),
  include_reasoning: Nullable(Schema.Boolean),
  reasoning: Nullable(Schema.Struct({ exclude: Nullable(Schema.Boolean) }))
})
export type ChatCompletionRequest = typeof ChatCompletionRequest.Type
