import { clipJoin } from "../common/clip.js"
import { CONSTRAINT_KEY, type Failed, type RunEvent, type TokenLogprob, type Usage } from "../protocol/RunEvent.js"
import { type RunOutcomeError, RunFailed, ToolValidationFailed, UpstreamRejected } from "./errors.js"
import * as Structure from "./filters/structure.js"
import * as Holdback from "./filters/holdback.js"
import * as Sentinel from "./filters/sentinel.js"
import * as Think from "./filters/think.js"
import * as Logprobs from "./logprobs.js"
import { reasoningOnlyContent } from "./reasoningFallback.js"
import { contentOf, emitText, toolParts } from "./sessionEmit.js"
import {
  type Closed,
  type Emission,
  isTerminal,
  MALFORMED_KEPT,
  type Open,
  PREVIEW_CHARS,
  preview,
  type Session,
  type SessionConfig,
  type SessionInput,
  type Summary,
  type Terminal
} from "./sessionTypes.js"
import { wrapAsCompletionTool } from "./toolcalls/completionTool.js"
import { normaliseToolCalls } from "./toolcalls/native.js"
import { withMarkers } from "./toolcalls/registry.js"
import { MAX_REASON_CHARS, validateToolCalls, validateToolChoice } from "./toolcalls/validate.js"

export * from "./sessionTypes.js"

/**
 * The chat-stream session as a reducer: run events in, OpenAI-level
 * emissions out. Pure apart from `newToolCallId`. A session that emitted its
 * terminal emission (Finish or Error) is Closed and accepts nothing more, so
 * every response has exactly one terminal outcome.
 */

export const initial = (config: SessionConfig): Session => ({
  _tag: "Open",
  config,
  contentSentinel: Sentinel.initial(config.policy.sentinels),
  reasoningSentinel: Sentinel.initial(config.policy.sentinels),
  think: Think.initial({ implicitOpen: config.policy.implicitThink }),
  structure: Structure.initial(config.policy.toolFormats),
  structureEntries: undefined,
  // Under `tool_choice: "none"` no call can be the answer's: markup stays the text it is.
  toolText:
    config.tools.length > 0 && config.toolChoice._tag !== "None"
      ? Holdback.initial({ formats: config.policy.toolFormats, tools: config.tools })
      : undefined,
  textCalls: [],
  reasoningToolText:
    config.tools.length > 0 && config.toolChoice._tag !== "None"
      ? Holdback.initial({ formats: withMarkers(config.policy.toolFormats), tools: config.tools })
      : undefined,
  reasoningCalls: [],
  malformed: [],
  malformedCount: 0,
  held: "",
  sawContent: false,
  reasoning: "",
  contentChars: 0,
  contentPreview: "",
  logprobs: undefined
})

export const step = (session: Session, input: SessionInput): readonly [Session, ReadonlyArray<Emission>] => {
  if (session._tag === "Closed") return [session, []]
  switch (input._tag) {
    case "Delta": {
      const out: Array<Emission> = []
      const next = session.structure === undefined
        ? content(session, input.text, out, input.logprobs)
        : structured(session, session.structure, input.text, out, input.logprobs)
      return [next, out]
    }
    case "ReasoningDelta": {
      const [reasoningSentinel, text] = Sentinel.append(session.reasoningSentinel, input.text)
      const out: Array<Emission> = []
      return [reasoning({ ...session, reasoningSentinel }, text, out), out]
    }
    case "Complete": {
      const [reasoningSeen, out] = finish(session, input)
      return close({ ...session, reasoning: reasoningSeen }, out, input.usage, input.metadata[CONSTRAINT_KEY])
    }
    case "Failed":
      return close(session, [{ _tag: "Error", error: failure(input) }])
    case "Cancelled":
      return close(session, [{ _tag: "Error", error: new RunFailed({ reason: input.message || "run failed" }) }])
    case "Outcome":
      return close(session, [{ _tag: "Error", error: input.error }])
    case "End":
      return close(session, [{ _tag: "Error", error: new RunFailed({ reason: "run stream closed" }) }])
  }
}

/** A failed run: an upstream 4xx keeps its meaning (status, code, Retry-After); anything else is the run's failure. */
const failure = (event: Failed): RunOutcomeError => {
  const upstream = event.upstream
  return upstream !== undefined && upstream.status >= 400 && upstream.status < 500
    ? new UpstreamRejected({
      status: upstream.status,
      code: upstream.code ?? null,
      message: upstream.message,
      retryAfter: upstream.retryAfter ?? null
    })
    : new RunFailed({ reason: event.message || "run failed" })
}

/** The Closed session, its summary counted from the last emissions (which end with the terminal). */
const close = (
  s: Open,
  out: ReadonlyArray<Emission>,
  usage?: Usage,
  constraint?: string
): readonly [Closed, ReadonlyArray<Emission>] => {
  let { contentChars, contentPreview } = s
  let toolCalls = 0
  const toolCallIds: Array<string> = []
  let normalised = false
  let terminal: Terminal | undefined
  for (const e of out) {
    if (e._tag === "Content") {
      contentChars += e.text.length
      contentPreview = preview(contentPreview, e.text)
    } else if (e._tag === "ToolCalls") {
      toolCalls += e.calls.length
      for (const call of e.calls) toolCallIds.push(call.id)
      normalised ||= e.wrapped === true
    } else if (isTerminal(e)) terminal = e
  }
  const exposed = s.config.policy.exposeReasoning ? s.reasoning : ""
  const summary: Summary = {
    contentChars,
    reasoningChars: s.reasoning.length,
    toolCalls,
    normalised,
    usage,
    constraint,
    contentPreview,
    reasoningPreview: exposed.slice(0, PREVIEW_CHARS),
    reasoning: s.reasoning,
    toolCallIds
  }
  // `out` always ends with its terminal emission; the fallback only satisfies the type.
  return [{ _tag: "Closed", terminal: terminal ?? { _tag: "Error", error: new RunFailed({ reason: "run failed" }) }, summary }, out]
}

/**
 * Raw content while the answer may be a list of messages (harmony, Functionary v3.2). Undecided, the filter holds
 * the text (and the session its logprobs); not that structure, the text goes on as content with them; that
 * structure, its messages are routed here and its markers dropped.
 */
const structured = (
  s: Open,
  state: Structure.Structure,
  raw: string,
  out: Array<Emission>,
  entries?: ReadonlyArray<TokenLogprob>
): Open => {
  const [next, parts] = Structure.append(state, raw)
  return structureParts(s, next, Structure.engaged(next), parts, out, entries)
}

const structureParts = (
  s: Open,
  state: Structure.Structure | undefined,
  engaged: boolean,
  parts: ReadonlyArray<Structure.StructureOutput>,
  out: Array<Emission>,
  entries?: ReadonlyArray<TokenLogprob>
): Open => {
  const held = entries === undefined ? s.structureEntries : [...(s.structureEntries ?? []), ...entries]
  if (state !== undefined && Structure.undecided(state)) return { ...s, structure: state, structureEntries: held }
  if (!engaged) {
    const text = parts.map((p) => (p._tag === "Content" ? p.text : "")).join("")
    return content({ ...s, structure: undefined, structureEntries: undefined }, text, out, held)
  }
  let next: Open = { ...s, structure: state, structureEntries: undefined }
  for (const part of parts) {
    if (part._tag === "Content") next = content(next, part.text, out)
    else if (part._tag === "Reasoning") {
      const [reasoningSentinel, text] = Sentinel.append(next.reasoningSentinel, part.text)
      next = reasoning({ ...next, reasoningSentinel }, text, out)
    } else next = toolParts(next, [part], out)
  }
  return next
}

/** Raw content: end tokens out, a leading think block to reasoning, tool-call markup to calls. */
const content = (s: Open, raw: string, out: Array<Emission>, entries?: ReadonlyArray<TokenLogprob>): Open => {
  const [contentSentinel, text] = Sentinel.append(s.contentSentinel, raw)
  if (entries === undefined && s.logprobs === undefined) {
    if (text === "") return contentSentinel === s.contentSentinel ? s : { ...s, contentSentinel }
    const [think, routed] = Think.append(s.think, text)
    return afterThink({ ...s, contentSentinel, think }, routed, out)
  }
  const taken = Logprobs.passed(Logprobs.intake(s.logprobs, entries, s.contentSentinel.ended), text.length)
  const [think, routed] = Think.append(s.think, text)
  const next = afterThink({ ...s, contentSentinel, think, logprobs: taken }, routed, out)
  return { ...next, logprobs: Logprobs.settle(next.logprobs ?? taken, Think.heldChars(think), s.toolText !== undefined) }
}

const afterThink = (s: Open, routed: Think.ThinkOutput, out: Array<Emission>): Open =>
  visible(reasoning(s, routed.reasoning, out), routed.content, out)

const reasoning = (s: Open, text: string, out: Array<Emission>): Open => {
  if (text === "") return s
  if (s.reasoningToolText === undefined) return reasoningText(s, text, out)
  const [reasoningToolText, parts] = Holdback.append(s.reasoningToolText, text)
  return reasoningParts({ ...s, reasoningToolText }, parts, out)
}

/** Markup in the reasoning is never shown; a call there is kept, a malformed block is a draft and dropped. */
const reasoningParts = (s: Open, parts: ReadonlyArray<Holdback.ToolTextOutput>, out: Array<Emission>): Open => {
  let next = s
  for (const part of parts) {
    if (part._tag === "Text") next = reasoningText(next, part.text, out)
    else if (part._tag === "Call") next = { ...next, reasoningCalls: [...next.reasoningCalls, part.call] }
  }
  return next
}

const reasoningText = (s: Open, text: string, out: Array<Emission>): Open => {
  if (text === "") return s
  if (s.config.policy.exposeReasoning) out.push({ _tag: "Reasoning", text })
  return { ...s, reasoning: s.reasoning + text }
}

const visible = (s: Open, text: string, out: Array<Emission>): Open => {
  if (text === "") return s
  if (s.logprobs !== undefined) {
    // The raw offset of `text`, so that the entries of what is shown go out with it.
    const [logprobs, at] = Logprobs.contentOut(s.logprobs, text.length, Think.heldChars(s.think))
    if (s.toolText === undefined) return emitText({ ...s, logprobs }, text, out, at)
    const ends: Array<number> = []
    const [toolText, parts] = Holdback.append(s.toolText, text, ends)
    return toolParts({ ...s, toolText, logprobs }, parts, out, { at, ends })
  }
  if (s.toolText === undefined) return emitText(s, text, out)
  const [toolText, parts] = Holdback.append(s.toolText, text)
  return toolParts({ ...s, toolText }, parts, out)
}

/** Drains every filter, resolves tool calls, and ends with exactly one terminal emission. */
const finish = (
  start: Open,
  complete: Extract<RunEvent, { _tag: "Complete" }>
): readonly [reasoning: string, ReadonlyArray<Emission>] => {
  const [s, out] = resolve(start, complete)
  return [s.reasoning, out]
}

const resolve = (start: Open, complete: Extract<RunEvent, { _tag: "Complete" }>): readonly [Open, ReadonlyArray<Emission>] => {
  const out: Array<Emission> = []
  const { config } = start
  // Markup cut off by the token limit is not malformed: the answer ends with `length`, the partial markup unshown.
  const cutOff = complete.finishReason === "length"
  let s = start
  if (s.structure !== undefined) {
    s = structureParts(s, undefined, Structure.engaged(s.structure), Structure.flush(s.structure, cutOff), out)
  }
  const tail = Sentinel.flush(s.contentSentinel)
  if (s.logprobs !== undefined) s = { ...s, logprobs: Logprobs.passed(s.logprobs, tail.length) }
  if (tail !== "") {
    const [think, routed] = Think.append(s.think, tail)
    s = afterThink({ ...s, think }, routed, out)
  }
  s = afterThink({ ...s, think: Think.FLUSHED }, Think.flush(s.think), out)
  if (s.toolText !== undefined) s = flushToolText(s, s.toolText, out, cutOff)
  s = reasoning(s, Sentinel.flush(s.reasoningSentinel), out)
  if (s.reasoningToolText !== undefined) {
    s = reasoningParts({ ...s, reasoningToolText: undefined }, Holdback.flush(s.reasoningToolText), out)
  }
  if (s.malformed.length > 0 && !cutOff) {
    const extra = s.malformedCount - s.malformed.length
    const parts = extra > 0 ? [...s.malformed, `…(+${extra} more)`] : s.malformed
    const reasons = clipJoin(parts, "; ", MALFORMED_KEPT + 1, MAX_REASON_CHARS - "malformed tool call markup: ".length)
    // Under a named tool_choice the call could only be to that tool.
    const named = config.toolChoice._tag === "Function" ? config.toolChoice.name : undefined
    return [s, [...out, invalid(`malformed tool call markup: ${reasons}`, named)]]
  }
  const answered = complete.toolCalls.length > 0 || s.textCalls.length > 0
  const textCalls = answered ? s.textCalls : s.reasoningCalls
  const parsed = [...complete.toolCalls, ...textCalls]
  // `parallel_tool_calls: false`, held for every upstream (some ignore it): the first call is the answer's.
  const allowed = config.parallelToolCalls === false ? parsed.slice(0, 1) : parsed
  let calls = normaliseToolCalls(allowed, config.tools, config.newToolCallId)
  let held = s.held
  let wrapped = false
  if (config.policy.completionTool !== null && calls.length === 0 && held.trim() !== "") {
    const call = wrapAsCompletionTool(held, config.policy.completionTool, config.tools)
    if (call !== undefined) {
      calls = normaliseToolCalls([call], config.tools, config.newToolCallId)
      held = ""
      wrapped = true
    }
  }
  // `tool_choice` for every request; the tools' schemas for strict ones.
  const verdict = config.policy.strict
    ? validateToolCalls(calls, config.tools, config.toolChoice)
    : validateToolChoice(calls, config.toolChoice, config.tools)
  if (verdict._tag === "Invalid") return [s, [...out, invalid(verdict.reason, verdict.tool)]]
  if (held !== "") out.push(contentOf(held, s.logprobs?.held ?? Logprobs.NONE))
  if (calls.length > 0) out.push(wrapped ? { _tag: "ToolCalls", calls, wrapped } : { _tag: "ToolCalls", calls })
  const finishReason = cutOff ? "length" : calls.length > 0 ? "tool_calls" : complete.finishReason || "stop"
  if (!config.policy.strict && calls.length === 0 && !s.sawContent && s.reasoning.trim() !== "") {
    out.push({
      _tag: "Content",
      text: reasoningOnlyContent({
        reasoning: s.reasoning,
        finishReason,
        exposeReasoning: config.policy.exposeReasoning
      })
    })
  }
  out.push({ _tag: "Finish", finishReason, usage: complete.usage })
  return [s, out]
}

const flushToolText = (s: Open, toolText: Holdback.ToolTextState, out: Array<Emission>, cutOff: boolean): Open => {
  if (s.logprobs === undefined) return toolParts(s, Holdback.flush(toolText, undefined, cutOff), out)
  const ends: Array<number> = []
  const parts = Holdback.flush(toolText, ends, cutOff)
  return toolParts(s, parts, out, { at: Logprobs.contentEnd(s.logprobs), ends })
}

const invalid = (reason: string, tool?: string): Emission => ({
  _tag: "Error",
  error: new ToolValidationFailed(tool === undefined ? { reason } : { reason, tool })
})
