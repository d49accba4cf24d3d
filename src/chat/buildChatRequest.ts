import * as Either from "effect/Either"
import type { ModelOptions } from "../protocol/ModelOptions.js"
import type { Api } from "../protocol/Api.js"
import { InvalidRequest } from "./EdgeError.js"
import type { ChatMessage, FunctionTool, SamplingParams, ToolChoice } from "../protocol/SubmitRunRequest.js"
import type { ChatRequest } from "./ChatRequest.js"
import { outputPolicy, type ReasoningRequest } from "./policy.js"
import { choiceBinds, toolChoiceMode } from "./toolcalls/validate.js"

/**
 * The chat plane's request, built from what any API's translator read out of its wire request: the checks every
 * dialect shares (tool schema size, `tool_choice` naming a tool) and the output policy are decided here once.
 */

/** `runs.maxToolSchemaBytes` when the config leaves it out. */
export const DEFAULT_MAX_TOOL_SCHEMA_BYTES = 262_144

/** The config's limits on a request (`runs.maxToolSchemaBytes`). */
export const requestLimitsOf = (runs: { readonly maxToolSchemaBytes?: number | undefined }): ChatRequestLimits => ({
  maxToolSchemaBytes: runs.maxToolSchemaBytes ?? DEFAULT_MAX_TOOL_SCHEMA_BYTES
})

export interface ChatRequestParts {
  readonly api: Api
  readonly model: ModelOptions
  readonly messages: ReadonlyArray<ChatMessage>
  readonly tools: ReadonlyArray<FunctionTool>
  readonly toolChoice?: ToolChoice | undefined
  readonly parallelToolCalls?: boolean | undefined
  /** The tools are the caller's allow-list (Responses `allowed_tools`): a call to any other is refused. */
  readonly allowedTools?: boolean | undefined
  readonly sampling: SamplingParams
  readonly metadata: Readonly<Record<string, string>>
  readonly stream: boolean
  readonly includeUsage: boolean
  readonly reasoning: ReasoningRequest
  /** What the translator did not forward, by request field (e.g. `tools: "namespace,web_search"`): see `ChatRequest`. */
  readonly notForwarded?: Readonly<Record<string, string>>
  /** Where each tool's schema and the tool choice sit in the caller's request, for error messages. */
  readonly params: {
    readonly toolSchema: (index: number) => string
    readonly toolChoice: string
  }
}

export interface ChatRequestLimits {
  readonly maxToolSchemaBytes: number
}

export type DialectRequest = ChatRequest & { readonly stream: boolean }

// Strict validation compiles each called tool's schema, at a cost in memory and time that grows with its size.
const oversizeToolSchema = (parts: ChatRequestParts, limit: number): InvalidRequest | undefined => {
  for (const [i, t] of parts.tools.entries()) {
    const bytes = t.function.parameters === undefined ? 0 : Buffer.byteLength(JSON.stringify(t.function.parameters))
    if (bytes > limit) {
      const param = parts.params.toolSchema(i)
      return new InvalidRequest({ message: `${param}: the schema is ${bytes} bytes, more than ${limit}`, param })
    }
  }
  return undefined
}

export const buildChatRequest = (
  parts: ChatRequestParts,
  limits: ChatRequestLimits
): Either.Either<DialectRequest, InvalidRequest> => {
  const oversize = oversizeToolSchema(parts, limits.maxToolSchemaBytes)
  if (oversize !== undefined) return Either.left(oversize)
  const tools = parts.tools.map((t) => ({
    name: t.function.name,
    description: t.function.description,
    parameters: t.function.parameters
  }))
  const choice = parts.toolChoice
  if (typeof choice === "object" && !tools.some((t) => t.name === choice.function.name)) {
    return Either.left(
      new InvalidRequest({
        message: `${parts.params.toolChoice} names the function "${choice.function.name}", which is not in tools`,
        param: parts.params.toolChoice
      })
    )
  }
  const mode = toolChoiceMode(choice, parts.allowedTools === true)
  return Either.right({
    api: parts.api,
    model: parts.model,
    submit: {
      model: parts.model.id,
      messages: parts.messages,
      tools: parts.tools,
      ...(choice !== undefined ? { toolChoice: choice } : {}),
      ...(parts.parallelToolCalls !== undefined ? { parallelToolCalls: parts.parallelToolCalls } : {}),
      sampling: parts.sampling,
      // Nothing needs the upstream's stream when the caller takes the answer whole: a provider may ask for JSON.
      ...(parts.stream ? {} : { wholeAnswer: true }),
      metadata: parts.metadata
    },
    stream: parts.stream,
    includeUsage: parts.includeUsage,
    tools,
    toolChoice: mode,
    policy: outputPolicy(parts.model, { ...parts.reasoning, toolNames: tools.map((t) => t.name), choiceBinds: choiceBinds(mode) }),
    ...(parts.notForwarded !== undefined ? { notForwarded: parts.notForwarded } : {})
  })
}
