import { type RunOutcomeError, RunFailed, upstreamRejectionAnswer } from "../../chat/errors.js"
import type { Emission } from "../../chat/session.js"
import type { ToolCall } from "../../chat/toolcalls/types.js"
import type { Usage } from "../../protocol/RunEvent.js"
import { type Rendered, SSE_COMMENT_KEEP_ALIVE, type StreamRenderer } from "../Dialect.js"

/**
 * The Responses API, rendered (PURE): session emissions → `event: <type>` / `data: <json>` frames, one string per
 * pulled batch, and the non-stream `response` object. Both run the same fold (`Fold`), so a stream's
 * `response.completed` and the non-stream body carry the same `output`.
 *
 * Output items, in the order the emissions come: reasoning → a `reasoning` item (its text as one summary part:
 * what the openai SDK accumulates and Codex shows), content → a `message` item with one `output_text` part, tool
 * calls → one `function_call` item each. A reasoning or message item stays open while its kind of text keeps
 * coming and is closed (its `.done` events) when another kind starts, so reasoning that comes back after content
 * opens a new item: `output_index` counts items in order, and every item and part opened is closed before the one
 * terminal event (`response.completed`, `response.incomplete` or `response.failed`). A token costs one
 * `JSON.stringify` of its text; the rest of a delta frame is built once per item. A response being stored has its
 * terminal event (completed or incomplete) held back (`ResponseContext.hold`) until the store answered (`release`):
 * a client that acts on it finds the response stored.
 */

/** The request fields a response echoes (as OpenAI's do), decided once per response. */
export interface Echo {
  readonly instructions: string | null
  readonly max_output_tokens: number | null
  readonly model: string
  readonly parallel_tool_calls: boolean
  readonly previous_response_id: string | null
  readonly reasoning: { readonly effort: string | null; readonly summary: string | null }
  readonly store: boolean
  readonly temperature: number | null
  readonly text: Readonly<Record<string, unknown>>
  readonly tool_choice: unknown
  readonly tools: ReadonlyArray<unknown>
  readonly top_p: number | null
  readonly truncation: string
  readonly user: string | null
  readonly metadata: Readonly<Record<string, string>>
  readonly prompt_cache_key: string | null
}

export interface ResponseContext {
  /** `resp_…`, from the run id. */
  readonly id: string
  /** The part of the item ids (`msg_<suffix>_<index>`) that names the response. */
  readonly suffix: string
  readonly created: number
  readonly echo: Echo
  /** The response is being stored: its terminal event waits for `release` (a stream's renderer only). */
  readonly hold?: boolean
}

export interface ResponsesUsage {
  readonly input_tokens: number
  readonly input_tokens_details: { readonly cached_tokens: number }
  readonly output_tokens: number
  readonly output_tokens_details: { readonly reasoning_tokens: number }
  readonly total_tokens: number
}

const NO_USAGE: Usage = { inputTokens: 0, outputTokens: 0 }

export const responsesUsage = (u: Usage): ResponsesUsage => ({
  input_tokens: u.inputTokens,
  input_tokens_details: { cached_tokens: u.cachedInputTokens ?? 0 },
  output_tokens: u.outputTokens,
  output_tokens_details: { reasoning_tokens: u.reasoningTokens ?? 0 },
  total_tokens: u.inputTokens + u.outputTokens
})

/**
 * The `error` of a failed response. Codes are OpenAI's where one fits (clients act on them: Codex retries
 * `server_error` and waits on `rate_limit_exceeded`, reports `context_length_exceeded` and does not retry
 * `invalid_prompt`); the edge's own tool validation failures keep their Chat Completions names.
 */
export const failedError = (e: RunOutcomeError): { readonly code: string; readonly message: string } => {
  switch (e._tag) {
    case "UpstreamRejected": {
      const a = upstreamRejectionAnswer(e)
      const fallback = a.status === 429 ? "rate_limit_exceeded" : a.status === 400 || a.status === 413 ? "invalid_prompt" : "server_error"
      return { code: a.status === 502 ? "server_error" : a.code ?? fallback, message: a.message }
    }
    case "RunFailed":
    case "RunTimedOut":
      return { code: "server_error", message: e.message }
    case "ToolValidationFailed":
      return { code: "tool_validation_error", message: e.message }
    case "ToolValidationRetryFailed":
      return { code: "tool_validation_retry_error", message: e.message }
  }
}

type Status = "in_progress" | "completed" | "incomplete" | "failed"

/** The `response` object at a point of its life. */
export const responseObject = (
  ctx: ResponseContext,
  status: Status,
  output: ReadonlyArray<unknown>,
  end: {
    readonly usage?: ResponsesUsage | null
    readonly error?: { readonly code: string; readonly message: string } | null
    readonly incomplete?: string | undefined
  } = {}
) => {
  const e = ctx.echo
  return {
    id: ctx.id,
    object: "response",
    created_at: ctx.created,
    status,
    background: false,
    error: end.error ?? null,
    incomplete_details: end.incomplete === undefined ? null : { reason: end.incomplete },
    instructions: e.instructions,
    max_output_tokens: e.max_output_tokens,
    model: e.model,
    output,
    parallel_tool_calls: e.parallel_tool_calls,
    previous_response_id: e.previous_response_id,
    reasoning: e.reasoning,
    store: e.store,
    temperature: e.temperature,
    text: e.text,
    tool_choice: e.tool_choice,
    tools: e.tools,
    top_p: e.top_p,
    truncation: e.truncation,
    usage: end.usage ?? null,
    user: e.user,
    metadata: e.metadata,
    prompt_cache_key: e.prompt_cache_key
  }
}

const outputText = (text: string) => ({ type: "output_text", annotations: [], logprobs: [], text })
const summaryText = (text: string) => ({ type: "summary_text", text })

/** Why a finished response is incomplete (OpenAI's `incomplete_details.reason`), if it is. */
const incompleteReason = (finishReason: string): string | undefined =>
  finishReason === "length" ? "max_output_tokens" : finishReason === "content_filter" ? "content_filter" : undefined

interface OpenItem {
  readonly kind: "message" | "reasoning"
  readonly id: string
  readonly index: number
  /** The frame of a delta up to its sequence number, and from there up to its text. */
  readonly deltaHead: string
  readonly deltaMid: string
  text: string
}

/** The fold both renderers share; `streaming` says whether it writes frames (the non-stream body needs none). */
class Fold {
  private seq = 0
  private out = ""
  private open: OpenItem | undefined = undefined
  readonly items: Array<unknown> = []
  terminal: Extract<Emission, { _tag: "Finish" | "Error" }> | undefined = undefined
  response: ResponseObject | undefined = undefined
  /** The terminal event's type, while it is held back (`ctx.hold`). */
  private held: string | undefined = undefined

  constructor(private readonly ctx: ResponseContext, private readonly streaming: boolean) {}

  /** One frame: `type` and `sequence_number` first, then `fields` (one `JSON.stringify`). */
  private event(type: string, fields: Readonly<Record<string, unknown>>): void {
    if (!this.streaming) return
    const json = JSON.stringify(fields)
    this.out += `event: ${type}\ndata: {"type":"${type}","sequence_number":${this.seq++}${json === "{}" ? "}" : `,${json.slice(1)}`}\n\n`
  }

  /** The head: `response.created` and `response.in_progress`, before any output. */
  head(): string {
    const response = responseObject(this.ctx, "in_progress", [])
    this.event("response.created", { response })
    this.event("response.in_progress", { response })
    return this.take()
  }

  take(): string {
    const text = this.out
    this.out = ""
    return text
  }

  private openItem(kind: OpenItem["kind"]): OpenItem {
    const index = this.items.length
    const id = `${kind === "message" ? "msg" : "rs"}_${this.ctx.suffix}_${index}`
    const where = `"item_id":${JSON.stringify(id)},"output_index":${index}`
    if (kind === "message") {
      this.event("response.output_item.added", {
        output_index: index,
        item: { id, type: "message", status: "in_progress", content: [], role: "assistant" }
      })
      this.event("response.content_part.added", { item_id: id, output_index: index, content_index: 0, part: outputText("") })
    } else {
      this.event("response.output_item.added", { output_index: index, item: { id, type: "reasoning", summary: [] } })
      this.event("response.reasoning_summary_part.added", {
        item_id: id,
        output_index: index,
        summary_index: 0,
        part: summaryText("")
      })
    }
    const type = kind === "message" ? "response.output_text.delta" : "response.reasoning_summary_text.delta"
    const item: OpenItem = {
      kind,
      id,
      index,
      deltaHead: `event: ${type}\ndata: {"type":"${type}","sequence_number":`,
      deltaMid: kind === "message" ? `,${where},"content_index":0,"delta":` : `,${where},"summary_index":0,"delta":`,
      text: ""
    }
    this.open = item
    return item
  }

  private closeOpen(status: "completed" | "incomplete"): void {
    const o = this.open
    if (o === undefined) return
    this.open = undefined
    const at = { item_id: o.id, output_index: o.index }
    let item: unknown
    if (o.kind === "message") {
      this.event("response.output_text.done", { ...at, content_index: 0, text: o.text, logprobs: [] })
      this.event("response.content_part.done", { ...at, content_index: 0, part: outputText(o.text) })
      item = { id: o.id, type: "message", status, content: [outputText(o.text)], role: "assistant" }
    } else {
      this.event("response.reasoning_summary_text.done", { ...at, summary_index: 0, text: o.text })
      this.event("response.reasoning_summary_part.done", { ...at, summary_index: 0, part: summaryText(o.text) })
      item = { id: o.id, type: "reasoning", summary: [summaryText(o.text)] }
    }
    this.event("response.output_item.done", { output_index: o.index, item })
    this.items.push(item)
  }

  private text(kind: OpenItem["kind"], text: string): void {
    if (text === "") return
    let o = this.open
    if (o === undefined || o.kind !== kind) {
      this.closeOpen("completed")
      o = this.openItem(kind)
    }
    o.text += text
    if (this.streaming) this.out += `${o.deltaHead}${this.seq++}${o.deltaMid}${JSON.stringify(text)}${kind === "message" ? ',"logprobs":[]' : ""}}\n\n`
  }

  private calls(calls: ReadonlyArray<ToolCall>): void {
    this.closeOpen("completed")
    for (const c of calls) {
      const index = this.items.length
      const id = `fc_${this.ctx.suffix}_${index}`
      const item = (status: string, args: string) => ({ id, type: "function_call", status, arguments: args, call_id: c.id, name: c.name })
      this.event("response.output_item.added", { output_index: index, item: item("in_progress", "") })
      if (c.arguments !== "") this.event("response.function_call_arguments.delta", { item_id: id, output_index: index, delta: c.arguments })
      this.event("response.function_call_arguments.done", { item_id: id, output_index: index, name: c.name, arguments: c.arguments })
      const done = item("completed", c.arguments)
      this.event("response.output_item.done", { output_index: index, item: done })
      this.items.push(done)
    }
  }

  step(e: Emission): void {
    if (this.terminal !== undefined) return
    switch (e._tag) {
      case "Content":
        return this.text("message", e.text)
      case "Reasoning":
        return this.text("reasoning", e.text)
      case "ToolCalls":
        return this.calls(e.calls)
      case "Finish": {
        const incomplete = incompleteReason(e.finishReason)
        this.closeOpen(incomplete === undefined ? "completed" : "incomplete")
        this.terminal = e
        this.response = responseObject(this.ctx, incomplete === undefined ? "completed" : "incomplete", this.items, {
          // An upstream that reported none: zeros, as Messages does (the AI SDK's stream schema requires the object).
          usage: responsesUsage(e.usage ?? NO_USAGE),
          incomplete
        })
        return this.end(incomplete === undefined ? "response.completed" : "response.incomplete")
      }
      case "Error":
        this.closeOpen("incomplete")
        this.terminal = e
        this.response = responseObject(this.ctx, "failed", this.items, { error: failedError(e.error) })
        return this.end("response.failed")
    }
  }

  /**
   * The terminal event, or (`ctx.hold`) nothing until `release`. A failed response's is never held: what a client
   * acts on is a finished response, and a run ended for a client that stopped reading hands its socket this event
   * at once.
   */
  private end(type: string): void {
    if (this.ctx.hold === true && this.streaming && type !== "response.failed") this.held = type
    else this.event(type, { response: this.response })
  }

  /** The held terminal event's text, once; `stored: false` (the store failed) is said in its response. */
  release(stored: boolean): string {
    const type = this.held
    const response = this.response
    if (type === undefined || response === undefined) return ""
    this.held = undefined
    this.event(type, { response: stored ? response : { ...response, store: false } })
    return this.take()
  }
}

/** The `response` object (what a non-stream request is answered, what a stream's terminal event carries). */
export type ResponseObject = ReturnType<typeof responseObject>

/** A Responses stream's renderer, with what the response store needs of it. */
export interface ResponsesStreamRenderer extends StreamRenderer {
  /** The response its terminal event carries, once the terminal was rendered. */
  readonly final: () => ResponseObject | undefined
  /** With `hold`: the held terminal event (none for a failed response), once the response was stored (or failed to be). */
  readonly release: (stored: boolean) => string
}

/** Renders one response's events; built once per response. Nothing follows the terminal event (no `[DONE]`). */
export const eventRenderer = (ctx: ResponseContext): ResponsesStreamRenderer => {
  const fold = new Fold(ctx, true)
  return {
    head: fold.head(),
    keepAlive: SSE_COMMENT_KEEP_ALIVE,
    batch: (emissions) => {
      for (const e of emissions) fold.step(e)
      return fold.take()
    },
    final: () => fold.response,
    release: (stored) => fold.release(stored)
  }
}

/** The non-stream `response` of a finished session (the object `response.completed` carries), or its error. */
export const responseBody = (ctx: ResponseContext, emissions: ReadonlyArray<Emission>): Rendered<ResponseObject> => {
  const fold = new Fold(ctx, false)
  for (const e of emissions) fold.step(e)
  const terminal = fold.terminal
  if (terminal === undefined) return { _tag: "Error", error: new RunFailed({ reason: "run ended without an outcome" }) }
  if (terminal._tag === "Error") return { _tag: "Error", error: terminal.error }
  return fold.response === undefined
    ? { _tag: "Error", error: new RunFailed({ reason: "run ended without an outcome" }) }
    : { _tag: "Body", body: fold.response }
}
