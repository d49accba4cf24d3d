import { type RunOutcomeError, RunFailed, upstreamRejectionAnswer } from "../../chat/errors.js"
import type { ReasoningField } from "../../chat/policy.js"
import type { Emission } from "../../chat/session.js"
import type { ToolCall } from "../../chat/toolcalls/types.js"
import type { TokenLogprob, Usage } from "../../protocol/RunEvent.js"
import { type ItemRenderer, type Rendered, SSE_COMMENT_KEEP_ALIVE, type StreamRenderer } from "../Dialect.js"
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChoiceLogprobs,
  ChunkDelta,
  CompletionUsage,
  TokenLogprob as WireTokenLogprob,
  ToolCall as WireToolCall,
  ToolCallDelta
} from "./completion.js"

/**
 * Chat Completions, rendered (pure): session emissions → `chat.completion.chunk`
 * SSE text, one string per pulled batch; the same chunks as typed objects
 * (`chunkBuilder`); and the non-stream `chat.completion`. The values are of the
 * types in `completion.ts`; JSON is made here, for the SSE text only.
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

export const openAiUsage = (u: Usage): CompletionUsage => ({
  prompt_tokens: u.inputTokens,
  completion_tokens: u.outputTokens,
  total_tokens: u.inputTokens + u.outputTokens,
  ...(u.cachedInputTokens !== undefined ? { prompt_tokens_details: { cached_tokens: u.cachedInputTokens } } : {}),
  ...(u.reasoningTokens !== undefined ? { completion_tokens_details: { reasoning_tokens: u.reasoningTokens } } : {})
})

const wireToolCalls = (calls: ReadonlyArray<ToolCall>): ReadonlyArray<WireToolCall> =>
  calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }))

const wireToolCallDeltas = (calls: ReadonlyArray<ToolCall>): ReadonlyArray<ToolCallDelta> =>
  calls.map((c, index) => ({ index, id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }))

/** OpenAI's `logprobs.content[]` entry. */
export const wireLogprob = (e: TokenLogprob): WireTokenLogprob => ({
  token: e.token,
  logprob: e.logprob,
  bytes: e.bytes ?? null,
  top_logprobs: (e.topLogprobs ?? []).map((t) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes ?? null }))
})

const wireLogprobs = (entries: ReadonlyArray<TokenLogprob>): ChoiceLogprobs => ({
  content: entries.map(wireLogprob),
  refusal: null
})

const reasoningFields = (
  field: ReasoningField,
  text: string
): { readonly reasoning_content?: string; readonly reasoning?: string } => {
  switch (field) {
    case "both":
      return { reasoning_content: text, reasoning: text }
    case "reasoning":
      return { reasoning: text }
    case "reasoning_content":
      return { reasoning_content: text }
  }
}

/** An emission that is a chunk's delta (text, reasoning, tool calls). */
type DeltaEmission = Extract<Emission, { readonly _tag: "Content" | "Reasoning" | "ToolCalls" }>

/**
 * What the chunk of one emission says — its delta and its logprobs. The one place that decides it, for the SSE
 * text (which serialises the delta into the response's envelope) and the typed chunks alike.
 */
const chunkDelta = (ctx: ResponseContext, e: DeltaEmission): ChunkDelta => {
  switch (e._tag) {
    case "Content":
      return { content: e.text }
    case "Reasoning":
      return reasoningFields(ctx.reasoningField, e.text)
    case "ToolCalls":
      return { tool_calls: wireToolCallDeltas(e.calls) }
  }
}

const ROLE: ChunkDelta = { role: "assistant", content: "" }

/** The chunks of one response, as objects: built once per response. */
const chunks = (ctx: ResponseContext) => {
  const chunk = (choices: ChatCompletionChunk["choices"]): ChatCompletionChunk => ({
    id: ctx.id,
    object: "chat.completion.chunk",
    created: ctx.created,
    model: ctx.model,
    choices
  })
  const delta = (d: ChunkDelta, logprobs: ChoiceLogprobs | null): ChatCompletionChunk =>
    chunk([{ index: 0, delta: d, logprobs, finish_reason: null }])
  /** The finish chunk and, when the request asked for usage, the usage chunk (`usage: null` if the run had none). */
  const finish = (e: Extract<Emission, { readonly _tag: "Finish" }>, out: Array<ChatCompletionChunk>): void => {
    out.push(chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: e.finishReason }]))
    if (ctx.includeUsage) out.push({ ...chunk([]), usage: e.usage === undefined ? null : openAiUsage(e.usage) })
  }
  return { delta, finish }
}

const logprobsOf = (e: DeltaEmission): ChoiceLogprobs | null =>
  e._tag === "Content" && e.logprobs !== undefined ? wireLogprobs(e.logprobs) : null

/**
 * The typed chunks of one response, for callers in code: the role chunk first, then the chunks of each emission
 * (the same deltas the SSE text carries). The run's failure is not a chunk: the Responder fails the stream with it.
 */
export const chunkBuilder = (ctx: ResponseContext): ItemRenderer<ChatCompletionChunk> => {
  const c = chunks(ctx)
  return {
    head: [c.delta(ROLE, null)],
    emission: (e, out) => {
      if (e._tag === "Finish") c.finish(e, out)
      else out.push(c.delta(chunkDelta(ctx, e), logprobsOf(e)))
    }
  }
}

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
 * Renders one response's chunks as SSE text; built once per response. The head is the role chunk
 * (`delta: {role: "assistant"}`); the terminal emission is followed by `[DONE]`. The envelope of a delta chunk
 * is serialised once per response: a chunk costs its delta object and one `JSON.stringify` of it (the text is
 * `JSON.stringify` of the `chunkBuilder` chunk, byte for byte: a test holds the two together).
 */
export const chunkRenderer = (ctx: ResponseContext): StreamRenderer => {
  const head = `data: {"id":${JSON.stringify(ctx.id)},"object":"chat.completion.chunk","created":${ctx.created},"model":${
    JSON.stringify(ctx.model)
  },"choices":[{"index":0,"delta":`
  const tail = `,"logprobs":null,"finish_reason":null}]}\n\n`
  const c = chunks(ctx)

  const one = (e: Emission): string => {
    switch (e._tag) {
      case "Content":
      case "Reasoning":
      case "ToolCalls": {
        const delta = JSON.stringify(chunkDelta(ctx, e))
        const logprobs = logprobsOf(e)
        return logprobs === null
          ? head + delta + tail
          : `${head}${delta},"logprobs":${JSON.stringify(logprobs)},"finish_reason":null}]}\n\n`
      }
      case "Finish": {
        const out: Array<ChatCompletionChunk> = []
        c.finish(e, out)
        let text = ""
        for (const chunk of out) text += frame(chunk)
        return text + DONE
      }
      case "Error":
        return frame(sseError(e.error)) + DONE
    }
  }

  return {
    head: head + JSON.stringify(ROLE) + tail,
    keepAlive: SSE_COMMENT_KEEP_ALIVE,
    batch: (emissions) => {
      let text = ""
      for (const e of emissions) text += one(e)
      return text
    }
  }
}

/** The non-stream `chat.completion` of a finished session, or its terminal error. */
export const completion = (ctx: ResponseContext, emissions: ReadonlyArray<Emission>): Rendered<ChatCompletion> => {
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
                  ...(calls.length > 0 ? { tool_calls: wireToolCalls(calls) } : {})
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
