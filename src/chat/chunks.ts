import type { Usage } from "../run/RunEvent.js"
import { type RunOutcomeError, RunFailed } from "./errors.js"
import type { ReasoningField } from "./policy.js"
import type { Emission } from "./session.js"
import type { ToolCall } from "./toolcalls/types.js"

/**
 * OpenAI wire objects built from session emissions: `chat.completion.chunk`s
 * for streams and one `chat.completion` for the non-stream path.
 */

export interface ResponseContext {
  readonly id: string
  readonly created: number
  readonly model: string
  readonly reasoningField: ReasoningField
  readonly includeUsage: boolean
}

export interface OpenAiUsage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens: number
  readonly prompt_tokens_details?: { readonly cached_tokens: number }
  readonly completion_tokens_details?: { readonly reasoning_tokens: number }
}

export const openAiUsage = (u: Usage): OpenAiUsage => ({
  prompt_tokens: u.inputTokens,
  completion_tokens: u.outputTokens,
  total_tokens: u.inputTokens + u.outputTokens,
  ...(u.cachedInputTokens !== undefined ? { prompt_tokens_details: { cached_tokens: u.cachedInputTokens } } : {}),
  ...(u.reasoningTokens !== undefined ? { completion_tokens_details: { reasoning_tokens: u.reasoningTokens } } : {})
})

export const wireToolCalls = (calls: ReadonlyArray<ToolCall>, withIndex: boolean) =>
  calls.map((c, index) => ({
    ...(withIndex ? { index } : {}),
    id: c.id,
    type: "function" as const,
    function: { name: c.name, arguments: c.arguments }
  }))

const reasoningFields = (field: ReasoningField, text: string): Record<string, string> =>
  field === "both" ? { reasoning_content: text, reasoning: text } : { [field]: text }

/** A stream item: an OpenAI chunk to write, or the terminal error to render as an SSE error event. */
export type StreamItem =
  | { readonly _tag: "Chunk"; readonly chunk: unknown }
  | { readonly _tag: "Error"; readonly error: RunOutcomeError }

const envelope = (ctx: ResponseContext, body: Record<string, unknown>): StreamItem => ({
  _tag: "Chunk",
  chunk: { id: ctx.id, object: "chat.completion.chunk", created: ctx.created, model: ctx.model, ...body }
})

const chunk = (ctx: ResponseContext, delta: Record<string, unknown>, finishReason: string | null = null) =>
  envelope(ctx, { choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] })

export const roleChunk = (ctx: ResponseContext): StreamItem => chunk(ctx, { role: "assistant", content: "" })

export const streamItems = (ctx: ResponseContext, e: Emission): ReadonlyArray<StreamItem> => {
  switch (e._tag) {
    case "Content":
      return [chunk(ctx, { content: e.text })]
    case "Reasoning":
      return [chunk(ctx, reasoningFields(ctx.reasoningField, e.text))]
    case "ToolCalls":
      return [chunk(ctx, { tool_calls: wireToolCalls(e.calls, true) })]
    case "Finish": {
      const finish = chunk(ctx, {}, e.finishReason)
      if (!ctx.includeUsage) return [finish]
      return [finish, envelope(ctx, { choices: [], usage: e.usage === undefined ? null : openAiUsage(e.usage) })]
    }
    case "Error":
      return [{ _tag: "Error", error: e.error }]
  }
}

/** The non-stream `chat.completion` of a finished session, or its terminal error. */
export const completion = (
  ctx: ResponseContext,
  emissions: ReadonlyArray<Emission>
): { readonly _tag: "Body"; readonly body: unknown } | { readonly _tag: "Error"; readonly error: RunOutcomeError } => {
  let content = ""
  let reasoning = ""
  let calls: ReadonlyArray<ToolCall> = []
  for (const e of emissions) {
    switch (e._tag) {
      case "Content":
        content += e.text
        break
      case "Reasoning":
        reasoning += e.text
        break
      case "ToolCalls":
        calls = [...calls, ...e.calls]
        break
      case "Error":
        return { _tag: "Error", error: e.error }
      case "Finish":
        return {
          _tag: "Body",
          body: {
            id: ctx.id,
            object: "chat.completion",
            created: ctx.created,
            model: ctx.model,
            choices: [
              {
                index: 0,
                message: {
                  role: "assistant",
                  content: content === "" && calls.length > 0 ? null : content,
                  ...(reasoning !== "" ? reasoningFields(ctx.reasoningField, reasoning) : {}),
                  ...(calls.length > 0 ? { tool_calls: wireToolCalls(calls, false) } : {})
                },
                logprobs: null,
                finish_reason: e.finishReason
              }
            ],
            ...(e.usage !== undefined ? { usage: openAiUsage(e.usage) } : {})
          }
        }
    }
  }
  // Unreachable for a session's output, which always ends with a terminal emission.
  return { _tag: "Error", error: new RunFailed({ reason: "run ended without an outcome" }) }
}
