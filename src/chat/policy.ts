import { DEFAULT_TEXT_FORMATS, type ModelOptions } from "../protocol/ModelOptions.js"
import { DEFAULT_SENTINELS } from "./filters/sentinel.js"
import type { TextFormat } from "./toolcalls/types.js"

export type ReasoningField = "reasoning_content" | "reasoning" | "both"

/** How one response is shaped: decided once from the model's config and the request. */
export interface OutputPolicy {
  readonly strict: boolean
  /** Collect and validate the whole run before the first chunk is written (retries possible). */
  readonly buffered: boolean
  /** Wrap a tool-less strict answer into a call of this request tool. */
  readonly completionTool: string | null
  readonly exposeReasoning: boolean
  readonly reasoningField: ReasoningField
  readonly implicitThink: boolean
  readonly sentinels: ReadonlyArray<string>
  readonly toolFormats: ReadonlyArray<TextFormat>
}

/** The reasoning flags of a request, as the caller sent them. */
export interface ReasoningRequest {
  readonly includeReasoning?: boolean | undefined
  readonly reasoningExclude?: boolean | undefined
  /** `metadata.iop_reasoning_field`, when valid. */
  readonly fieldOverride?: ReasoningField | undefined
}

/**
 * Reasoning is shown unless the caller hides it; a strict model hides it
 * unless the caller explicitly asks for it. Hiding wins over asking.
 */
export const exposeReasoning = (strict: boolean, r: ReasoningRequest): boolean => {
  const hidden = r.includeReasoning === false || r.reasoningExclude === true
  const asked = r.includeReasoning === true || r.reasoningExclude === false
  return !hidden && (!strict || asked)
}

// One list per model's sentinel config, so that the sentinel filter finds its matcher by the list itself.
const sentinelLists = new WeakMap<ModelOptions["sentinels"], ReadonlyArray<string>>()

export const sentinelsFor = (model: ModelOptions): ReadonlyArray<string> => {
  const config = model.sentinels
  const known = sentinelLists.get(config)
  if (known !== undefined) return known
  const list = config.replaceDefaults ? config.tokens : [...DEFAULT_SENTINELS, ...config.tokens]
  sentinelLists.set(config, list)
  return list
}

export const outputPolicy = (
  model: ModelOptions,
  request: ReasoningRequest & {
    readonly toolNames: ReadonlyArray<string>
    /** The request's `tool_choice` binds the answer (`choiceBinds`): a reply may break it and be replayed. */
    readonly choiceBinds?: boolean
  }
): OutputPolicy => {
  const strict = model.output.strict
  const completionTool =
    strict && model.output.xmlCompletionTool !== null && request.toolNames.includes(model.output.xmlCompletionTool)
      ? model.output.xmlCompletionTool
      : null
  return {
    strict,
    // Wrapping text into a call, or replaying a reply, is only possible before any of it was written.
    buffered: (strict || request.choiceBinds === true) && model.output.streamBuffer || completionTool !== null,
    completionTool,
    exposeReasoning: exposeReasoning(strict, request),
    reasoningField: request.fieldOverride ?? model.reasoning.field,
    implicitThink: model.reasoning.implicitOpen,
    sentinels: sentinelsFor(model),
    // Its node reads "auto" from the upstream's template; a model that never had one to read parses them all.
    toolFormats: model.toolFormats === "auto" ? DEFAULT_TEXT_FORMATS : model.toolFormats
  }
}
