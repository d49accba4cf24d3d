/** The session's data: what goes in, what comes out, its state and its summary (session.ts is the reducer). */
import type { RunEvent, TokenLogprob, Usage } from "../protocol/RunEvent.js"
import type { RunOutcomeError } from "./errors.js"
import type * as Structure from "./filters/structure.js"
import type * as Holdback from "./filters/holdback.js"
import type * as Sentinel from "./filters/sentinel.js"
import type * as Think from "./filters/think.js"
import type * as Logprobs from "./logprobs.js"
import type { OutputPolicy } from "./policy.js"
import type { ParsedToolCall, RequestTool, ToolCall, ToolChoiceMode } from "./toolcalls/types.js"

export type Emission =
  /** `logprobs`: the entries released with this text (logprobs.ts says which); absent when there are none. */
  | { readonly _tag: "Content"; readonly text: string; readonly logprobs?: ReadonlyArray<TokenLogprob> }
  | { readonly _tag: "Reasoning"; readonly text: string }
  /** `wrapped`: a text answer wrapped into the completion tool (logged as normalised). */
  | { readonly _tag: "ToolCalls"; readonly calls: ReadonlyArray<ToolCall>; readonly wrapped?: true }
  | { readonly _tag: "Finish"; readonly finishReason: string; readonly usage: Usage | undefined }
  | { readonly _tag: "Error"; readonly error: RunOutcomeError }

export type Terminal = Extract<Emission, { readonly _tag: "Finish" | "Error" }>

export const isTerminal = (e: Emission): e is Terminal => e._tag === "Finish" || e._tag === "Error"

/**
 * A run event; an outcome the run plane reported (idle timeout, node gone,
 * cancelled); or `End`: the run's events ended (without a terminal event
 * that is a broken stream).
 */
export type SessionInput =
  | RunEvent
  | { readonly _tag: "Outcome"; readonly error: RunOutcomeError }
  | { readonly _tag: "End" }

export const outcome = (error: RunOutcomeError): SessionInput => ({ _tag: "Outcome", error })

export const END: SessionInput = { _tag: "End" }

/** What a run did, for its log line and metrics: read from the Closed session, nowhere else. */
export interface Summary {
  readonly contentChars: number
  readonly reasoningChars: number
  readonly toolCalls: number
  /** A text answer was wrapped into the completion tool. */
  readonly normalised: boolean
  /** From the run's Complete event: counted even when the response then fails tool validation. */
  readonly usage: Usage | undefined
  /** From the run's Complete event: how its provider constrained the answer (`metadata.constraint`, as sent). */
  readonly constraint: string | undefined
  /** The first characters of content and reasoning (debug log). */
  readonly contentPreview: string
  readonly reasoningPreview: string
  /** The whole reasoning, shown or not (reasoning continuity remembers it; nothing logs it). */
  readonly reasoning: string
  /** The ids of the answer's tool calls, in order. */
  readonly toolCallIds: ReadonlyArray<string>
}

export const PREVIEW_CHARS = 1000
export const MALFORMED_KEPT = 3
export const preview = (sofar: string, text: string): string =>
  sofar.length >= PREVIEW_CHARS ? sofar : (sofar + text).slice(0, PREVIEW_CHARS)

export interface SessionConfig {
  readonly policy: OutputPolicy
  readonly tools: ReadonlyArray<RequestTool>
  readonly toolChoice: ToolChoiceMode
  /** `parallel_tool_calls: false`: at most one call (the first) is the answer's. */
  readonly parallelToolCalls?: boolean | undefined
  readonly newToolCallId: () => string
}

export interface Open {
  readonly _tag: "Open"
  readonly config: SessionConfig
  readonly contentSentinel: Sentinel.SentinelState
  readonly reasoningSentinel: Sentinel.SentinelState
  readonly think: Think.ThinkState
  /**
   * Until the answer is known not to be a list of messages (harmony, Functionary v3.2): their messages are
   * reasoning, content and calls. `structureEntries`: the logprobs of text it holds while undecided (such an
   * answer has none).
   */
  readonly structure: Structure.Structure | undefined
  readonly structureEntries: ReadonlyArray<TokenLogprob> | undefined
  /** Present while the request has tools: text tool-call markup is parsed, never shown. */
  readonly toolText: Holdback.ToolTextState | undefined
  readonly textCalls: ReadonlyArray<ParsedToolCall>
  /** The same over reasoning (markers only: a shape without markers is not read there). */
  readonly reasoningToolText: Holdback.ToolTextState | undefined
  /** Calls written in the reasoning: the answer's when it has none of its own. */
  readonly reasoningCalls: ReadonlyArray<ParsedToolCall>
  /** The first few reasons of markup that did not parse (kept short: a hostile stream may send thousands). */
  readonly malformed: ReadonlyArray<string>
  readonly malformedCount: number
  /** Content kept back to be wrapped into the completion tool. */
  readonly held: string
  readonly sawContent: boolean
  readonly reasoning: string
  readonly contentChars: number
  readonly contentPreview: string
  /** Made by the first Delta that carries logprobs: a run without them pays nothing for them. */
  readonly logprobs: Logprobs.LogprobState | undefined
}

/** The session emitted its terminal emission; it accepts nothing more. */
export interface Closed {
  readonly _tag: "Closed"
  readonly terminal: Terminal
  readonly summary: Summary
}

export type Session = Open | Closed
