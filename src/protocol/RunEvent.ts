import * as Schema from "effect/Schema"

/**
 * The events a node sends for one run. This is the edge↔node model: the
 * in-process transport passes these values as they are, a bus transport
 * encodes them with these schemas.
 */

export const RunId = Schema.String.pipe(Schema.brand("RunId"))
export type RunId = typeof RunId.Type

export const NodeId = Schema.String.pipe(Schema.brand("NodeId"))
export type NodeId = typeof NodeId.Type

/** A tool call as the provider reported it natively; `arguments` is JSON text. */
export const NativeToolCall = Schema.Struct({
  id: Schema.optional(Schema.String),
  name: Schema.String,
  arguments: Schema.String
})
export type NativeToolCall = typeof NativeToolCall.Type

export const Usage = Schema.Struct({
  inputTokens: Schema.Number,
  outputTokens: Schema.Number,
  reasoningTokens: Schema.optional(Schema.Number),
  cachedInputTokens: Schema.optional(Schema.Number)
})
export type Usage = typeof Usage.Type

/** One of the most likely tokens at a position, as the upstream reported it. */
export const TopLogprob = Schema.Struct({
  token: Schema.String,
  logprob: Schema.Number,
  bytes: Schema.optional(Schema.Array(Schema.Number))
})
export type TopLogprob = typeof TopLogprob.Type

/**
 * A sampled token's log probability (OpenAI's `logprobs.content[]` entry). Entries are laid end to end over the
 * run's content text, each covering `chars` UTF-16 code units of it (`token.length` when absent): the provider
 * sets `chars` where the upstream's tokens do not spell its text (byte tokens of a split character), so the
 * session can tell which entries belong to text that was shown.
 */
export const TokenLogprob = Schema.Struct({
  token: Schema.String,
  logprob: Schema.Number,
  bytes: Schema.optional(Schema.Array(Schema.Number)),
  topLogprobs: Schema.optional(Schema.Array(TopLogprob)),
  chars: Schema.optional(Schema.Number)
})
export type TokenLogprob = typeof TokenLogprob.Type

/** `logprobs` is optional, so that messages of nodes that do not send it still decode. */
export const Delta = Schema.TaggedStruct("Delta", {
  text: Schema.String,
  logprobs: Schema.optional(Schema.Array(TokenLogprob))
})
export const ReasoningDelta = Schema.TaggedStruct("ReasoningDelta", { text: Schema.String })
/**
 * `Complete.metadata[CONSTRAINT_KEY]`: how the provider constrained the answer's output at its upstream —
 * `grammar` (a GBNF grammar: llama.cpp's `grammar`, vLLM's structured-output grammar), `json_schema` (a JSON Schema
 * of the whole answer: Ollama's `format`), or `none` (validation only). Absent: the provider does not say.
 */
export const CONSTRAINT_KEY = "constraint"
export const OutputConstraint = Schema.Literal("grammar", "json_schema", "none")
export type OutputConstraint = typeof OutputConstraint.Type

export const Complete = Schema.TaggedStruct("Complete", {
  finishReason: Schema.String,
  toolCalls: Schema.Array(NativeToolCall),
  usage: Schema.optional(Usage),
  metadata: Schema.Record({ key: Schema.String, value: Schema.String })
})
/**
 * What an upstream's error answer said, when the run failed because of one: its HTTP status, its own error
 * `code` and message (clipped, scrubbed of credentials) and its `Retry-After` in seconds. Optional, so that
 * messages of nodes that do not send it still decode.
 */
export const UpstreamAnswer = Schema.Struct({
  status: Schema.Number,
  message: Schema.String,
  code: Schema.optional(Schema.String),
  retryAfter: Schema.optional(Schema.Number)
})
export type UpstreamAnswer = typeof UpstreamAnswer.Type

/**
 * `Failed.transport`: the run failed because its upstream could not be reached (`unreachable`: no answer at all) or
 * its answer broke off (`broken`): the node's fault, not the request's (the run plane's health reads it, and a run
 * that failed so before anything was written is tried on another node). Optional, so that older nodes' events decode.
 */
export const TransportFault = Schema.Literal("unreachable", "broken")
export type TransportFault = typeof TransportFault.Type

export const Failed = Schema.TaggedStruct("Failed", {
  message: Schema.String,
  upstream: Schema.optional(UpstreamAnswer),
  transport: Schema.optional(TransportFault)
})
export const Cancelled = Schema.TaggedStruct("Cancelled", { message: Schema.String })

export const RunEvent = Schema.Union(Delta, ReasoningDelta, Complete, Failed, Cancelled)
export type RunEvent = typeof RunEvent.Type
export type Delta = typeof Delta.Type
export type ReasoningDelta = typeof ReasoningDelta.Type
export type Complete = typeof Complete.Type
export type Failed = typeof Failed.Type
export type Cancelled = typeof Cancelled.Type

// Plain constructors: events are built on the hot path, so no validation here.
export const delta = (text: string): RunEvent => ({ _tag: "Delta", text })
export const deltaWithLogprobs = (text: string, logprobs: ReadonlyArray<TokenLogprob> | undefined): RunEvent =>
  logprobs === undefined ? { _tag: "Delta", text } : { _tag: "Delta", text, logprobs }
export const reasoningDelta = (text: string): RunEvent => ({ _tag: "ReasoningDelta", text })
export const complete = (fields: Omit<Complete, "_tag">): RunEvent => ({ _tag: "Complete", ...fields })
export const failed = (message: string, upstream?: UpstreamAnswer): RunEvent =>
  upstream === undefined ? { _tag: "Failed", message } : { _tag: "Failed", message, upstream }
/** A run that failed because its upstream could not be reached or its answer broke off (`Failed.transport`). */
export const transportFailed = (message: string, transport: TransportFault): RunEvent =>
  ({ _tag: "Failed", message, transport })
export const cancelled = (message: string): RunEvent => ({ _tag: "Cancelled", message })

export const isTerminal = (event: RunEvent): boolean =>
  event._tag === "Complete" || event._tag === "Failed" || event._tag === "Cancelled"
