import { expect } from "vitest"
import { chunk, type ChunkFields, type UsageFields, usageChunk } from "./fakeUpstream.js"

/**
 * Helpers for the tool-call and reasoning end-to-end tests: model text split
 * at awkward places, upstream scripts of content deltas, the wire shape of
 * the edge's chunks (typed, so no `any`), and checks on what reached content.
 */

// ---------------------------------------------------------------------------
// splitting model text

/** `text` cut into pieces whose lengths cycle through `sizes`. */
export const splitBySizes = (text: string, sizes: ReadonlyArray<number>): Array<string> => {
  const pieces: Array<string> = []
  let at = 0
  let k = 0
  while (at < text.length) {
    const size = Math.max(1, sizes[k % sizes.length] ?? 1)
    pieces.push(text.slice(at, at + size))
    at += size
    k++
  }
  return pieces
}

/** One piece per UTF-16 code unit. */
export const charByChar = (text: string): Array<string> => splitBySizes(text, [1])

/** `text` cut just before and just after every char of `marks` (`<`, `>`, `{`, `}`, ...). */
export const splitAroundMarks = (text: string, marks = "<>{}[]|/=\""): Array<string> => {
  const pieces: Array<string> = []
  let current = ""
  for (const c of text) {
    if (marks.includes(c)) {
      if (current !== "") pieces.push(current)
      pieces.push(c)
      current = ""
    } else current += c
  }
  if (current !== "") pieces.push(current)
  return pieces
}

/** Every way to cut `text` in two. */
export const everyTwoWaySplit = (text: string): Array<Array<string>> => {
  const out: Array<Array<string>> = []
  for (let i = 1; i < text.length; i++) out.push([text.slice(0, i), text.slice(i)])
  return out
}

/**
 * Every two-way cut of `text` at or inside an occurrence of one of `needles`
 * (the awkward places: inside a tag, right before or after it).
 */
export const cutsAround = (text: string, needles: ReadonlyArray<string>): Array<Array<string>> => {
  const at = new Set<number>()
  for (const needle of needles) {
    for (let i = text.indexOf(needle); i >= 0; i = text.indexOf(needle, i + 1)) {
      for (let k = i; k <= i + needle.length; k++) if (k > 0 && k < text.length) at.add(k)
    }
  }
  return [...at].sort((a, b) => a - b).map((k) => [text.slice(0, k), text.slice(k)])
}

/** A handful of awkward splittings of `text`, named for failure messages. */
export const awkwardSplits = (text: string): Array<{ readonly name: string; readonly pieces: Array<string> }> => [
  { name: "char by char", pieces: charByChar(text) },
  { name: "pairs", pieces: splitBySizes(text, [2]) },
  { name: "threes", pieces: splitBySizes(text, [3]) },
  { name: "ragged 1,4,2,7,3,5", pieces: splitBySizes(text, [1, 4, 2, 7, 3, 5]) },
  { name: "ragged 5,1,3,2,8", pieces: splitBySizes(text, [5, 1, 3, 2, 8]) },
  { name: "around tag chars", pieces: splitAroundMarks(text) }
]

// ---------------------------------------------------------------------------
// upstream scripts

export interface ContentStreamOptions {
  /** `reasoning_content` deltas sent before the content. */
  readonly reasoning?: ReadonlyArray<string>
  /** `reasoning` (vLLM's newer field) deltas sent before the content. */
  readonly reasoningField?: ReadonlyArray<string>
  readonly finish_reason?: string
  readonly usage?: UsageFields
}

/** A whole streamed upstream answer made of content deltas (one chunk per piece). */
export const contentStream = (pieces: ReadonlyArray<string>, opts: ContentStreamOptions = {}): Array<object> => [
  chunk({ role: "assistant", content: "" }),
  ...(opts.reasoning ?? []).map((text) => chunk({ reasoning_content: text })),
  ...(opts.reasoningField ?? []).map((text) => chunk({ reasoning: text })),
  ...pieces.map((content) => chunk({ content })),
  chunk({ finish_reason: opts.finish_reason ?? "stop" }),
  ...(opts.usage !== undefined ? [usageChunk(opts.usage)] : [])
]

/** An upstream stream of arbitrary chunk fields, then a finish chunk. */
export const chunkStream = (deltas: ReadonlyArray<ChunkFields>, finish_reason = "stop"): Array<object> => [
  chunk({ role: "assistant", content: "" }),
  ...deltas.map((d) => chunk(d)),
  chunk({ finish_reason })
]

// ---------------------------------------------------------------------------
// the edge's chunks, typed

export interface WireFunctionDelta {
  readonly name?: string
  readonly arguments?: string
}

export interface WireToolCallDelta {
  readonly index: number
  readonly id?: string
  readonly type?: string
  readonly function?: WireFunctionDelta
}

export interface WireDelta {
  readonly role?: string
  readonly content?: string | null
  readonly reasoning_content?: string
  readonly reasoning?: string
  readonly tool_calls?: ReadonlyArray<WireToolCallDelta>
}

export interface WireUsage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens: number
  readonly prompt_tokens_details?: { readonly cached_tokens?: number }
  readonly completion_tokens_details?: { readonly reasoning_tokens?: number }
}

export interface WireChoice {
  readonly index: number
  readonly delta: WireDelta
  readonly finish_reason: string | null
}

export interface WireChunk {
  readonly id: string
  readonly object: string
  readonly model: string
  readonly choices: ReadonlyArray<WireChoice>
  readonly usage?: WireUsage | null
}

export interface WireMessage {
  readonly role: string
  readonly content: string | null
  readonly reasoning_content?: string
  readonly reasoning?: string
  readonly tool_calls?: ReadonlyArray<{
    readonly id: string
    readonly type: string
    readonly function: { readonly name: string; readonly arguments: string }
  }>
}

export interface WireCompletion {
  readonly id: string
  readonly object: string
  readonly model: string
  readonly choices: ReadonlyArray<{ readonly index: number; readonly message: WireMessage; readonly finish_reason: string }>
  readonly usage?: WireUsage
}

/** What a stream of chunks amounts to. */
export interface StreamSummary {
  readonly chunks: ReadonlyArray<WireChunk>
  /** Every non-empty `delta.content`, in order. */
  readonly contents: ReadonlyArray<string>
  readonly content: string
  readonly reasoningContents: ReadonlyArray<string>
  readonly reasoningContent: string
  readonly reasonings: ReadonlyArray<string>
  readonly reasoning: string
  /** The chunks that carry `delta.tool_calls`. */
  readonly toolCallChunks: ReadonlyArray<WireChunk>
  readonly toolCalls: ReadonlyArray<WireToolCallDelta>
  /** Every non-null finish_reason, in order. */
  readonly finishReasons: ReadonlyArray<string>
  /** The usage of the `choices: []` chunk, when there is one. */
  readonly usage: WireUsage | null | undefined
}

export const summarise = (chunks: ReadonlyArray<WireChunk>): StreamSummary => {
  const contents: Array<string> = []
  const reasoningContents: Array<string> = []
  const reasonings: Array<string> = []
  const toolCallChunks: Array<WireChunk> = []
  const toolCalls: Array<WireToolCallDelta> = []
  const finishReasons: Array<string> = []
  let usage: WireUsage | null | undefined
  for (const c of chunks) {
    if (c.choices.length === 0 && c.usage !== undefined) usage = c.usage
    for (const choice of c.choices) {
      const d = choice.delta
      if (typeof d.content === "string" && d.content !== "") contents.push(d.content)
      if (typeof d.reasoning_content === "string" && d.reasoning_content !== "") reasoningContents.push(d.reasoning_content)
      if (typeof d.reasoning === "string" && d.reasoning !== "") reasonings.push(d.reasoning)
      if (d.tool_calls !== undefined && d.tool_calls.length > 0) {
        toolCallChunks.push(c)
        toolCalls.push(...d.tool_calls)
      }
      if (choice.finish_reason !== null && choice.finish_reason !== undefined) finishReasons.push(choice.finish_reason)
    }
  }
  return {
    chunks,
    contents,
    content: contents.join(""),
    reasoningContents,
    reasoningContent: reasoningContents.join(""),
    reasonings,
    reasoning: reasonings.join(""),
    toolCallChunks,
    toolCalls,
    finishReasons,
    usage
  }
}

/** Drains an SDK stream (or any async iterable of chunks) into its summary. */
export const collect = async <C>(stream: AsyncIterable<C>): Promise<StreamSummary> => {
  const chunks: Array<WireChunk> = []
  for await (const c of stream) chunks.push(c as unknown as WireChunk)
  return summarise(chunks)
}

/** Strings that are part of tool-call markup in any of the text formats. */
export const MARKUP_FRAGMENTS = [
  "<tool",
  "tool_call",
  "</tool",
  "{\"name\"",
  "{{",
  "}}",
  "[TOOL_CALLS",
  "<function",
  "<parameter",
  "</function",
  "</parameter"
] as const

/** Asserts that no single content delta (and not their concatenation) carries any of the markup `fragments`. */
export const expectNoMarkup = (
  summary: StreamSummary,
  fragments: ReadonlyArray<string> = MARKUP_FRAGMENTS,
  label = ""
): void => {
  for (const piece of [...summary.contents, summary.content]) {
    for (const fragment of fragments) {
      expect(piece.includes(fragment), `${label} content ${JSON.stringify(piece)} contains ${JSON.stringify(fragment)}`)
        .toBe(false)
    }
  }
}

/** The calls of a stream, with parsed arguments, in index order. */
export const parsedCalls = (summary: StreamSummary) =>
  [...summary.toolCalls]
    .sort((a, b) => a.index - b.index)
    .map((c) => ({
      index: c.index,
      id: c.id,
      type: c.type,
      name: c.function?.name,
      arguments: JSON.parse(c.function?.arguments ?? "null") as unknown
    }))

// ---------------------------------------------------------------------------
// JSON inside text

/** Every balanced `{...}` in `text` that parses as JSON (outermost first, then the ones inside it). */
export const jsonObjectsIn = (text: string): Array<unknown> => {
  const found: Array<unknown> = []
  for (let start = text.indexOf("{"); start >= 0; start = text.indexOf("{", start + 1)) {
    let depth = 0
    let inString = false
    for (let i = start; i < text.length; i++) {
      const c = text[i]
      if (inString) {
        if (c === "\\") i++
        else if (c === "\"") inString = false
        continue
      }
      if (c === "\"") inString = true
      else if (c === "{") depth++
      else if (c === "}") {
        depth--
        if (depth === 0) {
          try {
            found.push(JSON.parse(text.slice(start, i + 1)))
          } catch {
            // not JSON after all
          }
          break
        }
      }
    }
  }
  return found
}

const isDeepEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  const ka = Object.keys(a)
  const kb = Object.keys(b)
  if (ka.length !== kb.length) return false
  return ka.every((k) => isDeepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
}

/** True when `target` equals `value` or any value nested in it. */
export const containsDeep = (value: unknown, target: unknown): boolean => {
  if (isDeepEqual(value, target)) return true
  if (typeof value !== "object" || value === null) return false
  return Object.values(value).some((v) => containsDeep(v, target))
}

/** The text of a message's content (a string or content parts). */
export const messageText = (content: unknown): string => {
  if (typeof content === "string") return content
  if (Array.isArray(content)) {
    return content
      .map((p: unknown) =>
        typeof p === "object" && p !== null && "text" in p && typeof p.text === "string" ? p.text : ""
      )
      .join("\n")
  }
  return ""
}

export interface UpstreamMessage {
  readonly role: string
  readonly content?: unknown
  readonly tool_calls?: unknown
  readonly tool_call_id?: unknown
}

/** The `messages` of a recorded upstream request body. */
export const upstreamMessages = (body: unknown): ReadonlyArray<UpstreamMessage> => {
  const messages = (body as { messages?: unknown } | undefined)?.messages
  return Array.isArray(messages) ? (messages as ReadonlyArray<UpstreamMessage>) : []
}

// ---------------------------------------------------------------------------
// tools

export const WEATHER_PARAMETERS = {
  type: "object",
  properties: {
    city: { type: "string", description: "City name" },
    unit: { type: "string", enum: ["c", "f"] }
  },
  required: ["city"],
  additionalProperties: false
} as const

export const WEATHER_TOOL = {
  type: "function" as const,
  function: { name: "get_weather", description: "Current weather in a city", parameters: WEATHER_PARAMETERS }
}

export const THERMOSTAT_TOOL = {
  type: "function" as const,
  function: {
    name: "set_temperature",
    description: "Set a room's thermostat",
    parameters: {
      type: "object",
      properties: {
        room: { type: "string" },
        degrees: { type: "number" },
        label: { type: "string" }
      },
      required: ["room", "degrees"]
    }
  }
}

export const COMPLETION_TOOL = {
  type: "function" as const,
  function: {
    name: "attempt_completion",
    description: "Present the final answer",
    parameters: { type: "object", properties: { result: { type: "string" } }, required: ["result"] }
  }
}

/** `<tool_call>{"name": ..., "arguments": ...}</tool_call>` with the JSON as a model would write it. */
export const xmlCall = (name: string, args: object): string =>
  `<tool_call>\n{"name": "${name}", "arguments": ${JSON.stringify(args)}}\n</tool_call>`
