/**
 * Reasoning continuity: the reasoning the edge produced for an assistant turn, remembered so that when a client
 * sends the turn back without it (most Chat Completions clients drop `reasoning_content`; DeepSeek answers 400 on
 * turn 2 without it, GLM and Kimi lose quality) it can be put back before the turn goes upstream. A turn is found by
 * its tool-call ids (the edge handed them out: unguessable, exact) or else by its text. Bounded (turns and
 * characters, least recently used out first) and partitioned by model and API key: one caller's reasoning is never
 * put into another caller's request. Plain data and functions; the chat plane calls it.
 */
import type { ChatMessage, MessageContent } from "../protocol/SubmitRunRequest.js"

/** `runs.reasoningMemory`: how much reasoning the edge keeps for continuity. */
export interface ReasoningMemoryLimits {
  /** Turns remembered at most. */
  readonly maxTurns: number
  /** Characters of reasoning remembered at most, across turns. */
  readonly maxChars: number
}

/** What an assistant turn lacking its reasoning matched: a remembered tool call of it, its text, or nothing. */
export type ContinuityMatch = "tool_call" | "content" | "miss"

/** The text of a turn as its key sees it: how much of the start, leading whitespace aside, whitespace collapsed. */
export const CONTENT_KEY_CHARS = 800

/**
 * A turn's text as a key. Clients trim and re-wrap what they send back, so only the start counts (the summary keeps
 * the first 1000 characters of an answer, enough for any leading whitespace), with whitespace runs as one space.
 * Undefined for a turn with no text.
 */
export const contentKey = (text: string): string | undefined => {
  const key = text.trimStart().slice(0, CONTENT_KEY_CHARS).replace(/\s+/g, " ").trimEnd()
  return key === "" ? undefined : key
}

/** The text of a message's content (text parts joined as the edge's own answers are: one string). */
export const contentText = (content: MessageContent | undefined): string => {
  if (content === undefined || content === null) return ""
  if (typeof content === "string") return content
  let text = ""
  for (const part of content) if (part.type === "text" && typeof part["text"] === "string") text += part["text"]
  return text
}

interface Entry {
  readonly reasoning: string
  readonly keys: ReadonlyArray<string>
}

/** What an answer left to remember: its reasoning, the ids of its calls, the start of its text. */
export interface Answered {
  readonly reasoning: string
  readonly toolCallIds: ReadonlyArray<string>
  readonly contentPreview: string
}

export interface ReasoningMemory {
  /** Remembers an answer's reasoning under its calls' ids and its text, in `partition`. Nothing when it has none. */
  readonly remember: (partition: string, answer: Answered) => void
  /**
   * The messages with the reasoning of each assistant turn that lacks it put back where remembered, and what each
   * such turn matched (in order). `messages` itself when nothing was put back.
   */
  readonly restore: (
    partition: string,
    messages: ReadonlyArray<ChatMessage>
  ) => { readonly messages: ReadonlyArray<ChatMessage>; readonly matches: ReadonlyArray<ContinuityMatch> }
  /** Turns and characters held now. */
  readonly size: () => { readonly turns: number; readonly chars: number }
}

const SEP = "\u0000"

export const makeReasoningMemory = (limits: ReasoningMemoryLimits): ReasoningMemory => {
  // Key → entry; entries in least-recently-used order (a Map keeps insertion order: a hit re-inserts).
  const byKey = new Map<string, Entry>()
  const order = new Set<Entry>()
  let chars = 0

  const drop = (entry: Entry): void => {
    if (!order.delete(entry)) return
    chars -= entry.reasoning.length
    for (const key of entry.keys) if (byKey.get(key) === entry) byKey.delete(key)
  }

  const remember = (partition: string, answer: Answered): void => {
    if (answer.reasoning === "" || answer.reasoning.length > limits.maxChars) return
    const keys: Array<string> = []
    for (const id of answer.toolCallIds) keys.push(`${partition}${SEP}t${SEP}${id}`)
    const text = contentKey(answer.contentPreview)
    if (text !== undefined) keys.push(`${partition}${SEP}c${SEP}${text}`)
    if (keys.length === 0) return
    const entry: Entry = { reasoning: answer.reasoning, keys }
    for (const key of keys) {
      const old = byKey.get(key)
      if (old !== undefined) drop(old)
      byKey.set(key, entry)
    }
    order.add(entry)
    chars += entry.reasoning.length
    for (const oldest of order) {
      if (order.size <= limits.maxTurns && chars <= limits.maxChars) break
      drop(oldest)
    }
  }

  const find = (partition: string, message: ChatMessage): readonly [Entry, ContinuityMatch] | undefined => {
    for (const call of message.tool_calls ?? []) {
      const hit = byKey.get(`${partition}${SEP}t${SEP}${call.id}`)
      if (hit !== undefined) return [hit, "tool_call"]
    }
    const text = contentKey(contentText(message.content))
    const hit = text === undefined ? undefined : byKey.get(`${partition}${SEP}c${SEP}${text}`)
    return hit === undefined ? undefined : [hit, "content"]
  }

  const restore = (partition: string, messages: ReadonlyArray<ChatMessage>) => {
    const matches: Array<ContinuityMatch> = []
    let out: Array<ChatMessage> | undefined
    for (const [i, message] of messages.entries()) {
      if (message.role !== "assistant" || (message.reasoning_content ?? "") !== "") continue
      const found = find(partition, message)
      if (found === undefined) {
        matches.push("miss")
        continue
      }
      const [entry, match] = found
      matches.push(match)
      // Recently used: kept over turns no conversation refers to any more.
      order.delete(entry)
      order.add(entry)
      out ??= messages.slice()
      out[i] = { ...message, reasoning_content: entry.reasoning }
    }
    return { messages: out ?? messages, matches }
  }

  return { remember, restore, size: () => ({ turns: order.size, chars }) }
}
