import type * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import * as Either from "effect/Either"
import { clip } from "../common/clip.js"
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChunkDelta,
  CompletionUsage,
  ToolCall
} from "../dialects/chat-completions/completion.js"

/**
 * The edge's answers → `@effect/ai`'s response parts (pure): a `chat.completion` as the parts of `generateText`, and
 * the `chat.completion.chunk`s as the stream parts of `streamText` (text and reasoning opened, streamed and ended
 * as blocks; each tool call whole, its parameters parsed; one finish with the reason and the usage). A `Left` is
 * an answer the parts cannot hold: a tool call whose arguments are not JSON.
 */

type Mapped<A> = Either.Either<A, string>

const FINISH_REASONS: Readonly<Record<string, Response.FinishReason>> = {
  stop: "stop",
  length: "length",
  tool_calls: "tool-calls",
  function_call: "tool-calls",
  content_filter: "content-filter"
}

/**
 * An OpenAI finish reason as `@effect/ai`'s. Without one, or with an upstream's own, an answer with tool calls
 * finished for them; else it is `unknown` (none) or `other`.
 */
export const finishReason = (reason: string | null | undefined, hasToolCalls: boolean): Response.FinishReason => {
  const known = reason == null ? undefined : FINISH_REASONS[reason]
  return known ?? (hasToolCalls ? "tool-calls" : reason == null ? "unknown" : "other")
}

export const usage = (u: CompletionUsage | null | undefined): typeof Response.Usage.Encoded => ({
  inputTokens: u?.prompt_tokens,
  outputTokens: u?.completion_tokens,
  totalTokens: u?.total_tokens,
  ...(u?.completion_tokens_details !== undefined ? { reasoningTokens: u.completion_tokens_details.reasoning_tokens } : {}),
  ...(u?.prompt_tokens_details !== undefined ? { cachedInputTokens: u.prompt_tokens_details.cached_tokens } : {})
})

/** A tool call with its parameters parsed (no arguments at all are no parameters). */
export const toolCallPart = (call: ToolCall): Mapped<Response.ToolCallPartEncoded> =>
  Either.map(
    Either.mapLeft(
      Either.try(() => (call.function.arguments.trim() === "" ? {} : Tool.unsafeSecureJsonParse(call.function.arguments))),
      () => `the arguments of the call to '${call.function.name}' are not JSON: ${clip(call.function.arguments, 200)}`
    ),
    (params) => ({ type: "tool-call", id: call.id, name: call.function.name, params })
  )

const metadata = (answer: { readonly id: string; readonly model: string; readonly created: number }): Response.ResponseMetadataPartEncoded => ({
  type: "response-metadata",
  id: answer.id,
  modelId: answer.model,
  timestamp: new Date(answer.created * 1000).toISOString()
})

/** The reasoning a delta or message carries: under one field or both (the same text), per the model's policy. */
const reasoningOf = (d: { readonly reasoning_content?: string | undefined; readonly reasoning?: string | undefined }): string =>
  d.reasoning_content ?? d.reasoning ?? ""

/** The parts of `generateText`: metadata, reasoning, text, tool calls, finish. */
export const completionParts = (completion: ChatCompletion): Mapped<Array<Response.PartEncoded>> => {
  const choice = completion.choices[0]
  const calls = choice?.message.tool_calls ?? []
  return Either.map(Either.all(calls.map(toolCallPart)), (toolCalls) => {
    const reasoning = choice === undefined ? "" : reasoningOf(choice.message)
    const text = choice?.message.content ?? ""
    return [
      metadata(completion),
      ...(reasoning !== "" ? [{ type: "reasoning", text: reasoning } as const] : []),
      ...(text !== "" ? [{ type: "text", text } as const] : []),
      ...toolCalls,
      { type: "finish", reason: finishReason(choice?.finish_reason, toolCalls.length > 0), usage: usage(completion.usage) }
    ]
  })
}

type Block = "text" | "reasoning"

/** Where a streamed answer is: the block open (its id), how many were opened, what the finish will say. */
export interface StreamState {
  readonly started: boolean
  readonly open: { readonly kind: Block; readonly id: string } | undefined
  readonly blocks: number
  readonly reason: string | null
  readonly toolCalls: boolean
  readonly usage: CompletionUsage | null | undefined
}

export const streamStart: StreamState = {
  started: false,
  open: undefined,
  blocks: 0,
  reason: null,
  toolCalls: false,
  usage: undefined
}

const close = (s: StreamState, out: Array<Response.StreamPartEncoded>): StreamState => {
  if (s.open === undefined) return s
  out.push({ type: s.open.kind === "text" ? "text-end" : "reasoning-end", id: s.open.id })
  return { ...s, open: undefined }
}

/** Text or reasoning into its block: the other one ends, this one starts if it is not open. */
const into = (s: StreamState, kind: Block, delta: string, out: Array<Response.StreamPartEncoded>): StreamState => {
  if (delta === "") return s
  let next = s
  if (next.open?.kind !== kind) {
    next = close(next, out)
    const id = `${kind}_${next.blocks}`
    out.push({ type: kind === "text" ? "text-start" : "reasoning-start", id })
    next = { ...next, open: { kind, id }, blocks: next.blocks + 1 }
  }
  out.push({ type: kind === "text" ? "text-delta" : "reasoning-delta", id: next.open?.id ?? "", delta })
  return next
}

const deltaParts = (
  s: StreamState,
  delta: ChunkDelta,
  out: Array<Response.StreamPartEncoded>
): Mapped<StreamState> => {
  let next = into(s, "reasoning", reasoningOf(delta), out)
  next = into(next, "text", delta.content ?? "", out)
  const calls = delta.tool_calls ?? []
  if (calls.length === 0) return Either.right(next)
  return Either.map(Either.all(calls.map(toolCallPart)), (parts) => {
    const closed = close(next, out)
    for (const part of parts) out.push(part)
    return { ...closed, toolCalls: true }
  })
}

/** One chunk's parts (the first chunk opens with the response's metadata). */
export const streamStep = (
  s: StreamState,
  chunk: ChatCompletionChunk
): Mapped<readonly [StreamState, ReadonlyArray<Response.StreamPartEncoded>]> => {
  const out: Array<Response.StreamPartEncoded> = []
  let next = s
  if (!next.started) {
    out.push(metadata(chunk))
    next = { ...next, started: true }
  }
  if (chunk.usage !== undefined) next = { ...next, usage: chunk.usage }
  const choice = chunk.choices[0]
  if (choice === undefined) return Either.right([next, out])
  return Either.map(deltaParts(next, choice.delta, out), (after) => {
    const finished = choice.finish_reason === null ? after : { ...close(after, out), reason: choice.finish_reason }
    return [finished, out] as const
  })
}

/** The stream's end: the open block ends, then the one finish (with the usage chunk's usage, if one came). */
export const streamEnd = (s: StreamState): ReadonlyArray<Response.StreamPartEncoded> => {
  const out: Array<Response.StreamPartEncoded> = []
  close(s, out)
  out.push({ type: "finish", reason: finishReason(s.reason, s.toolCalls), usage: usage(s.usage) })
  return out
}
