import { type RunOutcomeError, RunFailed, upstreamRejectionAnswer } from "../../chat/errors.js"
import type { ReasoningField } from "../../chat/policy.js"
import type { Emission } from "../../chat/session.js"
import type { ToolCall } from "../../chat/toolcalls/types.js"
import type { TokenLogprob, Usage } from "../../run/RunEvent.js"
import type { Rendered, StreamRenderer } from "../Dialect.js"

/**
 * Chat Completions, rendered (pure): session emissions → `chat.completion.chunk`
 * SSE text, one string per pulled batch, and the non-stream `chat.completion`.
 * The chunk envelope is serialised once per response; a token costs one
 * `JSON.stringify` of its text.
 */

export interface ResponseContext {
  readonly id: string
  readonly created: number
  readonly model: string
  readonly reasoningField: ReasoningField
  readonly includeUsage: boolean
  /** The request asked for `logprobs`: the non-stream `choices[0].logprobs` is an object, not null. */
  readonly logprobs?: boolean
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

/** OpenAI's `logprobs.content[]` entry. */
export const wireLogprob = (e: TokenLogprob) => ({
  token: e.token,
  logprob: e.logprob,
  bytes: e.bytes ?? null,
  top_logprobs: (e.topLogprobs ?? []).map((t) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes ?? null }))
})

const wireLogprobs = (entries: ReadonlyArray<TokenLogprob>) => ({ content: entries.map(wireLogprob), refusal: null })

const reasoningFields = (field: ReasoningField, text: string): Record<string, string> =>
  field === "both" ? { reasoning_content: text, reasoning: text } : { [field]: text }

/** The payload of the one SSE error event that ends a stream that already started. */
export const sseError = (
  e: RunOutcomeError
): { readonly error: { readonly type: string; readonly message: string; readonly code?: string } } => {
  switch (e._tag) {
    case "UpstreamRejected": {
      const a = upstreamRejectionAnswer(e)
      return { error: a.code === null ? { type: a.type, message: a.message } : { type: a.type, message: a.message, code: a.code } }
    }
    case "RunFailed":
    case "RunTimedOut":
    case "NoNodeAccepted":
      return { error: { type: "run_error", message: e.message } }
    case "ToolValidationFailed":
      return { error: { type: "tool_validation_error", message: e.message } }
    case "ToolValidationRetryFailed":
      return { error: { type: "tool_validation_retry_error", message: e.message } }
  }
}

export const DONE = "data: [DONE]\n\n"

const frame = (json: unknown): string => `data: ${JSON.stringify(json)}\n\n`

/**
 * Renders one response's chunks; built once per response. The head is the role chunk
 * (`delta: {role: "assistant"}`); the terminal emission is followed by `[DONE]`.
 */
export const chunkRenderer = (ctx: ResponseContext): StreamRenderer => {
  const head = `data: {"id":${JSON.stringify(ctx.id)},"object":"chat.completion.chunk","created":${ctx.created},"model":${
    JSON.stringify(ctx.model)
  },"choices":[{"index":0,"delta":`
  const tail = `,"logprobs":null,"finish_reason":null}]}\n\n`
  const delta = (json: string) => head + json + tail
  const withLogprobs = (json: string, entries: ReadonlyArray<TokenLogprob>) =>
    `${head}${json},"logprobs":${JSON.stringify(wireLogprobs(entries))},"finish_reason":null}]}\n\n`
  const envelope = (body: Record<string, unknown>) =>
    frame({ id: ctx.id, object: "chat.completion.chunk", created: ctx.created, model: ctx.model, ...body })

  const one = (e: Emission): string => {
    switch (e._tag) {
      case "Content":
        return e.logprobs === undefined
          ? delta(`{"content":${JSON.stringify(e.text)}}`)
          : withLogprobs(`{"content":${JSON.stringify(e.text)}}`, e.logprobs)
      case "Reasoning":
        return delta(JSON.stringify(reasoningFields(ctx.reasoningField, e.text)))
      case "ToolCalls":
        return delta(JSON.stringify({ tool_calls: wireToolCalls(e.calls, true) }))
      case "Finish": {
        const finish = envelope({
          choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: e.finishReason }]
        })
        const usage = ctx.includeUsage
          ? envelope({ choices: [], usage: e.usage === undefined ? null : openAiUsage(e.usage) })
          : ""
        return finish + usage + DONE
      }
      case "Error":
        return frame(sseError(e.error)) + DONE
    }
  }

  return {
    head: delta(`{"role":"assistant","content":""}`),
    batch: (emissions) => {
      let text = ""
      for (const e of emissions) text += one(e)
      return text
    }
  }
}

/** The non-stream `chat.completion` of a finished session, or its terminal error. */
export const completion = (ctx: ResponseContext, emissions: ReadonlyArray<Emission>): Rendered => {
  let content = ""
  let reasoning = ""
  let calls: ReadonlyArray<ToolCall> = []
  const entries: Array<TokenLogprob> = []
  for (const e of emissions) {
    switch (e._tag) {
      case "Content":
        content += e.text
        if (e.logprobs !== undefined) for (const entry of e.logprobs) entries.push(entry)
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
                  refusal: null,
                  ...(reasoning !== "" ? reasoningFields(ctx.reasoningField, reasoning) : {}),
                  ...(calls.length > 0 ? { tool_calls: wireToolCalls(calls, false) } : {})
                },
                logprobs: ctx.logprobs === true ? wireLogprobs(entries) : null,
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
