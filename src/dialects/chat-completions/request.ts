import * as Either from "effect/Either"
import {
  buildChatRequest,
  type ChatRequestLimits,
  requestLimitsOf,
  type DialectRequest
} from "../../chat/buildChatRequest.js"
import { ModelNotFound } from "../../chat/errors.js"
import type { ReasoningField } from "../../chat/policy.js"
import { type EdgeConfigShape, findModel, type ModelOptions } from "../../config/EdgeConfig.js"
import type { InvalidRequest } from "../../chat/EdgeError.js"
import { decodeJsonBody, decodeValue } from "../jsonBody.js"
import { UPSTREAM_CONSTRAINTS } from "../../protocol/SubmitRunRequest.js"
import { ChatCompletionRequest } from "./wire.js"

/** Parses and decodes the body; an error names the offending field in a few hundred characters, never quoting its value. */
export const decodeBody: (text: string) => Either.Either<ChatCompletionRequest, InvalidRequest> = decodeJsonBody(
  ChatCompletionRequest
)

/**
 * A request built in code, held to the body's checks (ranges, lengths, shapes): the typed API rejects what
 * `POST /v1/chat/completions` rejects, with the same error.
 */
export const decodeWire: (wire: unknown) => Either.Either<ChatCompletionRequest, InvalidRequest> = decodeValue(
  ChatCompletionRequest
)

const REASONING_FIELDS: ReadonlyArray<ReasoningField> = ["reasoning_content", "reasoning", "both"]
const isReasoningField = (s: string | undefined): s is ReasoningField => REASONING_FIELDS.some((f) => f === s)

const defined = <T>(value: T | null | undefined): T | undefined => (value === null ? undefined : value)

/** The upstream constraints the caller sent, as sent (none: undefined, so nothing is added upstream). */
const upstreamConstraints = (wire: ChatCompletionRequest): Record<string, unknown> | undefined => {
  const out: Record<string, unknown> = {}
  for (const field of UPSTREAM_CONSTRAINTS) {
    const value = wire[field]
    if (value !== undefined && value !== null) out[field] = value
  }
  return Object.keys(out).length === 0 ? undefined : out
}

/** A Chat Completions request, its model resolved, as the chat plane's request. */
export const toChatRequest = (
  wire: ChatCompletionRequest,
  model: ModelOptions,
  limits: ChatRequestLimits
): Either.Either<DialectRequest, InvalidRequest> => {
  const metadata = wire.metadata ?? {}
  const fieldOverride = metadata["iop_reasoning_field"]
  const maxTokens = defined(wire.max_completion_tokens) ?? defined(wire.max_tokens)
  const maxTokensField = defined(wire.max_completion_tokens) !== undefined
    ? "max_completion_tokens"
    : defined(wire.max_tokens) !== undefined
    ? "max_tokens"
    : undefined
  return buildChatRequest({
    api: "chat_completions",
    model,
    messages: wire.messages,
    tools: wire.tools ?? [],
    toolChoice: defined(wire.tool_choice),
    parallelToolCalls: defined(wire.parallel_tool_calls),
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
      topLogprobs: defined(wire.top_logprobs),
      constraints: upstreamConstraints(wire)
    },
    metadata,
    stream: wire.stream === true,
    includeUsage: wire.stream_options?.include_usage === true,
    reasoning: {
      includeReasoning: defined(wire.include_reasoning),
      reasoningExclude: defined(wire.reasoning?.exclude),
      fieldOverride: isReasoningField(fieldOverride) ? fieldOverride : undefined
    },
    params: { toolSchema: (i) => `tools[${i}].function.parameters`, toolChoice: "tool_choice" }
  }, limits)
}

/** For callers that hold the edge's config: the model (an id or an alias) resolved, then the request built. */
export const resolveChatRequest = (
  config: EdgeConfigShape,
  wire: ChatCompletionRequest
): Either.Either<DialectRequest, ModelNotFound | InvalidRequest> => {
  const model = findModel(config.models, wire.model)
  if (model === undefined) return Either.left(new ModelNotFound({ model: wire.model }))
  return toChatRequest(wire, model, requestLimitsOf(config.runs))
}
