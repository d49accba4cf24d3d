import type { ToolMode } from "../../protocol/ModelOptions.js"
import * as RunEvent from "../../protocol/RunEvent.js"
import {
  chunkError,
  type UpstreamChunk,
  type UpstreamDelta,
  type UpstreamInput,
  type UpstreamTokenLogprob,
  type UpstreamToolCallDelta,
  type UpstreamUsage
} from "./upstreamWire.js"

/**
 * Upstream `chat.completion.chunk`s → `RunEvent`s, as a pure reducer.
 * `step` maps one chunk to its text events and remembers what only the end
 * needs (tool calls, finish reason, usage, model, an upstream error);
 * `finish` turns that into the terminal event. `feed` drives both from the
 * decoded stream (chunks, `[DONE]`, broken events, the end of the body, a
 * transport failure): an input that ends the stream maps to its terminal
 * event, last. Whoever feeds it stops there (the provider leaves its
 * `streaming` state); the run's channel is the one terminator.
 */

interface PendingCall {
  readonly index: number
  readonly id: string | undefined
  readonly name: string | undefined
  readonly arguments: string
}

type Emit = readonly [MapperState, ReadonlyArray<RunEvent.RunEvent>]

export interface MapperState {
  readonly toolMode: ToolMode
  /** How the provider constrained this answer at the upstream: `Complete.metadata[CONSTRAINT_KEY]` (absent: unsaid). */
  readonly constraint: RunEvent.OutputConstraint | undefined
  /** The configured upstream model, used when the upstream does not name one. */
  readonly configuredModel: string | undefined
  readonly reportedModel: string | undefined
  readonly calls: ReadonlyArray<PendingCall>
  readonly finishReason: string | undefined
  readonly usage: RunEvent.Usage | undefined
  readonly error: string | undefined
  /** Logprob entries of chunks that had no text (the first bytes of a split character): they go with the next text. */
  readonly carried: ReadonlyArray<UpstreamTokenLogprob>
}

const NO_ENTRIES: ReadonlyArray<UpstreamTokenLogprob> = []

export const initial = (options?: {
  readonly toolMode?: ToolMode
  readonly upstreamModel?: string
  readonly constraint?: RunEvent.OutputConstraint
}): MapperState => ({
  toolMode: options?.toolMode ?? "native",
  constraint: options?.constraint,
  configuredModel: options?.upstreamModel,
  reportedModel: undefined,
  calls: [],
  finishReason: undefined,
  usage: undefined,
  error: undefined,
  carried: NO_ENTRIES
})

const nonEmpty = (s: string | null | undefined): s is string => typeof s === "string" && s !== ""

const contentText = (content: UpstreamDelta["content"]): string => {
  if (content === undefined || content === null) return ""
  if (typeof content === "string") return content
  let text = ""
  for (const part of content) {
    if (typeof part === "object" && part !== null && "text" in part && typeof part.text === "string") text += part.text
  }
  return text
}

const argumentsText = (args: unknown): string => {
  if (args === undefined || args === null) return ""
  return typeof args === "string" ? args : JSON.stringify(args)
}

const nextIndex = (calls: ReadonlyArray<PendingCall>): number =>
  calls.reduce((max, call) => Math.max(max, call.index + 1), 0)

// Which call a delta continues. Servers that omit `index` are keyed by `id`; a
// delta with a new `id` at an index already taken (seen from servers that send
// every parallel call at index 0) starts a new call rather than corrupting one.
const callIndexOf = (calls: ReadonlyArray<PendingCall>, delta: UpstreamToolCallDelta): number => {
  const id = nonEmpty(delta.id) ? delta.id : undefined
  if (typeof delta.index === "number") {
    const at = calls.find((call) => call.index === delta.index)
    if (at !== undefined && id !== undefined && at.id !== undefined && at.id !== id) {
      return calls.find((call) => call.id === id)?.index ?? nextIndex(calls)
    }
    return delta.index
  }
  if (id !== undefined) return calls.find((call) => call.id === id)?.index ?? nextIndex(calls)
  return calls.at(-1)?.index ?? 0
}

const addToolDelta = (calls: ReadonlyArray<PendingCall>, delta: UpstreamToolCallDelta): ReadonlyArray<PendingCall> => {
  const index = callIndexOf(calls, delta)
  const id = nonEmpty(delta.id) ? delta.id : undefined
  const name = nonEmpty(delta.function?.name) ? delta.function.name : undefined
  const args = argumentsText(delta.function?.arguments)
  const existing = calls.find((call) => call.index === index)
  if (existing === undefined) return [...calls, { index, id, name, arguments: args }]
  // id and name come from the first delta that has them; later repeats are ignored, arguments concatenate.
  const updated: PendingCall = {
    index,
    id: existing.id ?? id,
    name: existing.name ?? name,
    arguments: existing.arguments + args
  }
  return calls.map((call) => (call === existing ? updated : call))
}

/** The chunk's usage; its cached prompt tokens from `prompt_tokens_details`, else llama.cpp's `timings.cache_n`. */
const toUsage = (usage: UpstreamUsage, timings: UpstreamChunk["timings"]): RunEvent.Usage | undefined => {
  const input = usage.prompt_tokens
  const output = usage.completion_tokens
  if (typeof input !== "number" && typeof output !== "number") return undefined
  const reasoning = usage.completion_tokens_details?.reasoning_tokens
  const cached = usage.prompt_tokens_details?.cached_tokens ?? timings?.cache_n
  return {
    inputTokens: input ?? 0,
    outputTokens: output ?? 0,
    ...(typeof reasoning === "number" ? { reasoningTokens: reasoning } : {}),
    ...(typeof cached === "number" ? { cachedInputTokens: cached } : {})
  }
}

// A split character takes at most 4 byte tokens: more text-less entries than this are not one, and are not kept.
const MAX_CARRIED = 16

/** The UTF-16 units of the chars whose UTF-8 encoding starts in `bytes` (a char goes with its first byte). */
const charsStartedIn = (bytes: ReadonlyArray<number>): number => {
  let n = 0
  for (const b of bytes) if ((b & 0xc0) !== 0x80) n += b >= 0xf0 ? 2 : 1
  return n
}

/** How many chars of `text` each entry covers: by its bytes when they spell the text, else by its token. */
const coverage = (entries: ReadonlyArray<UpstreamTokenLogprob>, text: string): ReadonlyArray<number> => {
  const byBytes = entries.map((e) => (e.bytes == null ? -1 : charsStartedIn(e.bytes)))
  if (byBytes.every((n) => n >= 0) && byBytes.reduce((a, b) => a + b, 0) === text.length) return byBytes
  // Each covers its token's length, clipped to what is left; the last covers the rest.
  let left = text.length
  return entries.map((e, i) => {
    const chars = i === entries.length - 1 ? left : Math.min((e.token ?? "").length, left)
    left -= chars
    return chars
  })
}

/**
 * A chunk's logprob entries as the run's, laid over its `text` so that together they cover exactly it, whatever
 * the upstream's tokens spell (byte tokens of a split character); `chars` is set only where an entry covers
 * other than `token.length`. Entries with no `logprob` are left out (there is nothing to relay).
 */
export const tokenLogprobs = (
  entries: ReadonlyArray<UpstreamTokenLogprob>,
  text: string
): ReadonlyArray<RunEvent.TokenLogprob> => {
  const out: Array<RunEvent.TokenLogprob> = []
  const usable = entries.filter((e) => typeof e.logprob === "number")
  const covered = coverage(usable, text)
  usable.forEach((e, i) => {
    const token = e.token ?? ""
    const chars = covered[i] ?? 0
    const top = e.top_logprobs
    out.push({
      token,
      logprob: e.logprob ?? 0,
      ...(e.bytes != null ? { bytes: e.bytes } : {}),
      ...(top != null ? { topLogprobs: top.flatMap(topLogprob) } : {}),
      ...(chars !== token.length ? { chars } : {})
    })
  })
  return out
}

const topLogprob = (t: UpstreamTokenLogprob): ReadonlyArray<RunEvent.TopLogprob> =>
  typeof t.logprob === "number"
    ? [{ token: t.token ?? "", logprob: t.logprob, ...(t.bytes != null ? { bytes: t.bytes } : {}) }]
    : []

/** Maps one upstream chunk: its text events now, the rest remembered for `finish`. */
export const step = (state: MapperState, chunk: UpstreamChunk): Emit => {
  if (state.error !== undefined) return [state, []]
  const reportedModel = state.reportedModel ?? (nonEmpty(chunk.model) ? chunk.model : undefined)
  const error = chunkError(chunk)
  if (error !== undefined) return [{ ...state, reportedModel, error }, []]
  const events: Array<RunEvent.RunEvent> = []
  let calls = state.calls
  let finishReason = state.finishReason
  let carried = state.carried
  for (const choice of chunk.choices ?? []) {
    // Only the first choice: the edge never asks for n > 1.
    if ((choice.index ?? 0) !== 0) continue
    const delta = choice.delta
    // Only content tokens: the entries of a reasoning or tool-call chunk are not the content's.
    const entries = choice.logprobs?.content
    if (delta !== undefined && delta !== null) {
      // vLLM may send the same text as both `reasoning` and `reasoning_content`: take one.
      const reasoning = nonEmpty(delta.reasoning_content) ? delta.reasoning_content : delta.reasoning
      if (nonEmpty(reasoning)) events.push(RunEvent.reasoningDelta(reasoning))
      const text = contentText(delta.content) + (delta.refusal ?? "")
      if (text !== "") {
        const logprobs = entries == null || entries.length === 0
          ? carried.length === 0 ? undefined : tokenLogprobs(carried, text)
          : tokenLogprobs(carried.length === 0 ? entries : [...carried, ...entries], text)
        events.push(RunEvent.deltaWithLogprobs(text, logprobs))
        carried = NO_ENTRIES
      } else if (entries != null && entries.length > 0 && !nonEmpty(reasoning) && delta.tool_calls == null) {
        carried = [...carried, ...entries].slice(-MAX_CARRIED)
      }
      for (const toolDelta of delta.tool_calls ?? []) calls = addToolDelta(calls, toolDelta)
    }
    if (nonEmpty(choice.finish_reason)) finishReason = choice.finish_reason
  }
  const usage = chunk.usage !== undefined && chunk.usage !== null
    ? toUsage(chunk.usage, chunk.timings) ?? state.usage
    : state.usage
  // A text chunk changes nothing of the state: the same state goes on (no copy per token).
  if (
    reportedModel === state.reportedModel && calls === state.calls && finishReason === state.finishReason &&
    usage === state.usage && carried === state.carried
  ) return [state, events]
  return [{ ...state, reportedModel, calls, finishReason, usage, carried }, events]
}

/** The terminal event: `Complete` with what was accumulated, or `Failed` when the upstream reported an error. */
export const finish = (state: MapperState): RunEvent.RunEvent => {
  if (state.error !== undefined) return RunEvent.failed(`upstream error: ${state.error}`)
  const toolCalls: Array<RunEvent.NativeToolCall> = [...state.calls]
    .sort((a, b) => a.index - b.index)
    .map((call) => ({
      ...(call.id !== undefined ? { id: call.id } : {}),
      name: call.name ?? "",
      arguments: call.arguments
    }))
  const reason = state.finishReason ?? "stop"
  const model = state.reportedModel ?? state.configuredModel
  return RunEvent.complete({
    finishReason: toolCalls.length > 0 && reason === "stop" ? "tool_calls" : reason,
    toolCalls,
    ...(state.usage !== undefined ? { usage: state.usage } : {}),
    metadata: {
      ...(model !== undefined ? { upstream_model: model } : {}),
      ...(state.toolMode === "text" ? { tool_mode: "text" } : {}),
      ...(state.constraint !== undefined ? { [RunEvent.CONSTRAINT_KEY]: state.constraint } : {})
    }
  })
}

/** What the provider's stream feeds the mapper: decoded events, then how the body ended. */
export type StreamInput =
  | UpstreamInput
  | { readonly _tag: "End" }
  | { readonly _tag: "TransportFailed"; readonly message: string }

export const END: StreamInput = { _tag: "End" }

export const EARLY_END_MESSAGE = "upstream stream ended early"

/**
 * One input of the upstream stream → events. `Done`, `Malformed`,
 * `TransportFailed`, `End` and an error chunk end the stream: their events end
 * with its terminal event; any other input maps to no terminal event.
 */
export const feed = (state: MapperState, input: StreamInput): Emit => {
  switch (input._tag) {
    case "Chunk": {
      const [next, events] = step(state, input.chunk)
      return next.error !== undefined ? [next, [...events, finish(next)]] : [next, events]
    }
    case "Done":
      return [state, [finish(state)]]
    case "Malformed":
      return [state, [RunEvent.failed(input.message)]]
    case "TransportFailed":
      return [state, [RunEvent.transportFailed(input.message, "broken")]]
    case "End":
      // Without `[DONE]`, a finish_reason still means the upstream finished (some servers omit `[DONE]`).
      return [state, [state.finishReason !== undefined ? finish(state) : RunEvent.failed(EARLY_END_MESSAGE)]]
  }
}
