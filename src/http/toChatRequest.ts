import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { ChatRequest } from "../chat/ChatRequest.js"
import { ModelNotFound } from "../chat/errors.js"
import { outputPolicy, type ReasoningField } from "../chat/policy.js"
import { toolChoiceMode } from "../chat/toolcalls/validate.js"
import type { RequestTool } from "../chat/toolcalls/types.js"
import type { EdgeConfigShape, ModelConfig } from "../config/EdgeConfig.js"
import { clip, primaryIssue } from "../config/parseIssues.js"
import type { SubmitRunRequest } from "../run/SubmitRunRequest.js"
import { InvalidRequest } from "./errors.js"
import { ChatCompletionRequest } from "./wire/ChatCompletionRequest.js"

const decodeWire = Schema.decodeUnknownEither(ChatCompletionRequest, { errors: "all" })

/** Parses and decodes the body; an error names the offending field in a few hundred characters, never quoting its value. */
export const decodeBody = (text: string): Either.Either<ChatCompletionRequest, InvalidRequest> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    const detail = clip(e instanceof Error ? e.message : String(e), 200)
    return Either.left(new InvalidRequest({ message: `request body is not valid JSON: ${detail}`, param: null }))
  }
  return Either.mapLeft(decodeWire(json), (error) => {
    const first = primaryIssue(error)
    const param = first === undefined || first.path === "" ? null : first.path
    const message = first === undefined ? "invalid request" : param === null ? first.message : `${param}: ${first.message}`
    return new InvalidRequest({ message, param })
  })
}

const REASONING_FIELDS: ReadonlyArray<ReasoningField> = ["reasoning_content", "reasoning", "both"]
const isReasoningField = (s: string | undefined): s is ReasoningField => REASONING_FIELDS.some((f) => f === s)

const defined = <T>(value: T | null | undefined): T | undefined => (value === null ? undefined : value)

/** `runs.maxToolSchemaBytes` when the config leaves it out. */
export const DEFAULT_MAX_TOOL_SCHEMA_BYTES = 262_144

// Strict validation compiles each called tool's schema, at a cost in memory and time that grows with its size.
const oversizeToolSchema = (
  tools: ChatCompletionRequest["tools"],
  limit: number
): InvalidRequest | undefined => {
  for (const [i, t] of (tools ?? []).entries()) {
    const bytes = t.function.parameters === undefined ? 0 : Buffer.byteLength(JSON.stringify(t.function.parameters))
    if (bytes > limit) {
      const param = `tools[${i}].function.parameters`
      return new InvalidRequest({ message: `${param}: the schema is ${bytes} bytes, more than ${limit}`, param })
    }
  }
  return undefined
}

/** Resolves the model and decides everything the chat plane needs for one request. */
export const toChatRequest = (
  config: EdgeConfigShape,
  wire: ChatCompletionRequest,
  /** The model's config as a remote node announced it, for models not in the edge's own config. */
  announced?: ModelConfig
): Effect.Effect<ChatRequest & { readonly stream: boolean }, ModelNotFound | InvalidRequest> => {
  const model = config.models.find((m) => m.id === wire.model) ?? announced
  if (model === undefined) return Effect.fail(new ModelNotFound({ model: wire.model }))
  const oversize = oversizeToolSchema(wire.tools, config.runs.maxToolSchemaBytes ?? DEFAULT_MAX_TOOL_SCHEMA_BYTES)
  if (oversize !== undefined) return Effect.fail(oversize)
  const wireTools = wire.tools ?? []
  const tools: ReadonlyArray<RequestTool> = wireTools.map((t) => ({
    name: t.function.name,
    description: t.function.description,
    parameters: t.function.parameters
  }))
  const choice = defined(wire.tool_choice)
  if (typeof choice === "object" && !tools.some((t) => t.name === choice.function.name)) {
    return Effect.fail(
      new InvalidRequest({
        message: `tool_choice names the function "${choice.function.name}", which is not in tools`,
        param: "tool_choice"
      })
    )
  }
  const metadata = wire.metadata ?? {}
  const fieldOverride = metadata["iop_reasoning_field"]
  const maxTokens = defined(wire.max_completion_tokens) ?? defined(wire.max_tokens)
  const maxTokensField = defined(wire.max_completion_tokens) !== undefined
    ? "max_completion_tokens"
    : defined(wire.max_tokens) !== undefined
    ? "max_tokens"
    : undefined
  const submit: SubmitRunRequest = {
    model: model.id,
    messages: wire.messages,
    tools: wireTools,
    ...(choice !== undefined ? { toolChoice: choice } : {}),
    ...(wire.parallel_tool_calls != null ? { parallelToolCalls: wire.parallel_tool_calls } : {}),
    sampling: {
      temperature: defined(wire.temperature),
      topP: defined(wire.top_p),
      maxTokens,
      stop: defined(wire.stop),
      seed: defined(wire.seed),
      presencePenalty: defined(wire.presence_penalty),
      frequencyPenalty: defined(wire.frequency_penalty),
      responseFormat: defined(wire.response_format),
      maxTokensField,
      reasoningEffort: defined(wire.reasoning_effort),
      user: defined(wire.user),
      logitBias: defined(wire.logit_bias),
      logprobs: defined(wire.logprobs),
      topLogprobs: defined(wire.top_logprobs)
    },
    metadata
  }
  return Effect.succeed({
    model,
    submit,
    stream: wire.stream === true,
    includeUsage: wire.stream_options?.include_usage === true,
    tools,
    toolChoice: toolChoiceMode(choice),
    policy: outputPolicy(model, {
      includeReasoning: defined(wire.include_reasoning),
      reasoningExclude: defined(wire.reasoning?.exclude),
      fieldOverride: isReasoningField(fieldOverride) ? fieldOverride : undefined,
      toolNames: tools.map((t) => t.name)
    })
  })
}
