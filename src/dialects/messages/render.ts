import { RunFailed } from "../../chat/errors.js"
import type { Emission } from "../../chat/session.js"
import { isRecord, parseJson } from "../../chat/toolcalls/json.js"
import type { ToolCall } from "../../chat/toolcalls/types.js"
import type { Usage } from "../../protocol/RunEvent.js"
import type { Rendered, StreamRenderer } from "../Dialect.js"
import { streamError } from "./errors.js"

/**
 * Anthropic Messages, rendered (pure): session emissions → `event: <type>` / `data: <json>` SSE text, one string per
 * pulled batch, and the non-stream `message`. Envelopes are built as strings once per block; a token costs one
 * `JSON.stringify` of its text.
 */

export interface MessageContext {
  /** `msg_…`, from the run id. */
  readonly id: string
  /** The model name the caller asked for. */
  readonly model: string
  /**
   * `message_start`'s `input_tokens`: the best count the edge has when it writes it, its estimate of the request
   * (what `count_tokens` answers); the upstream's figures come in `message_delta`. Clients (LangChain) read input
   * usage from `message_start`.
   */
  readonly inputTokens?: number
}

export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" | "refusal"

/**
 * The session's finish reason in Anthropic's terms. OpenAI-compatible upstreams say `stop` for a stop sequence and
 * for the end of the turn alike, so `stop_sequence` only comes from an upstream that says so itself.
 */
export const stopReason = (finishReason: string, calledTools: boolean): StopReason => {
  if (calledTools) return "tool_use"
  switch (finishReason) {
    case "length":
      return "max_tokens"
    case "stop_sequence":
      return "stop_sequence"
    case "content_filter":
      return "refusal"
    default:
      // `stop`, and `tool_calls` without a call left (nothing to run: the turn is over).
      return "end_turn"
  }
}

export interface AnthropicUsage {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_read_input_tokens?: number
}

/** Anthropic counts cache reads apart from `input_tokens`; OpenAI's `prompt_tokens` includes them. */
export const anthropicUsage = (u: Usage | undefined): AnthropicUsage => {
  if (u === undefined) return { input_tokens: 0, output_tokens: 0 }
  const cached = u.cachedInputTokens
  return cached === undefined
    ? { input_tokens: u.inputTokens, output_tokens: u.outputTokens }
    : { input_tokens: Math.max(0, u.inputTokens - cached), output_tokens: u.outputTokens, cache_read_input_tokens: cached }
}

/**
 * A call's `input`: Anthropic's is always a JSON object, and clients read it as one. Arguments that are not one (a
 * non-strict model can write anything) are wrapped whole as the string they are under this key, so nothing the
 * model wrote is lost, the client's own input validation names the problem, and the translator (request.ts) unwraps
 * it when the call comes back in the history: the model sees exactly what it wrote.
 */
export const RAW_ARGUMENTS_KEY = "_raw_arguments"

/** The input's JSON text (the arguments as they are when they are an object) and value. */
export const toolInput = (args: string): { readonly json: string; readonly value: Readonly<Record<string, unknown>> } => {
  const parsed = parseJson(args)
  if (parsed.ok && isRecord(parsed.value)) return { json: args, value: parsed.value }
  const value = { [RAW_ARGUMENTS_KEY]: args }
  return { json: JSON.stringify(value), value }
}

/** Anthropic's (and its clients') pattern for a tool_use id; an upstream's id outside it is mapped into it. */
const TOOL_ID = /^[A-Za-z0-9_-]+$/
export const toolUseId = (id: string): string => (TOOL_ID.test(id) ? id : id.replace(/[^A-Za-z0-9_-]/g, "_"))

const frame = (type: string, json: string): string => `event: ${type}\ndata: ${json}\n\n`

// Anthropic's keep-alive: one after `message_start`, then one whenever the run was silent `KEEP_ALIVE_AFTER_MS`.
const PING = frame("ping", `{"type":"ping"}`)

const blockStop = (index: number): string =>
  frame("content_block_stop", `{"type":"content_block_stop","index":${index}}`)

const blockStart = (index: number, block: string): string =>
  frame("content_block_start", `{"type":"content_block_start","index":${index},"content_block":${block}}`)

const deltaHead = (index: number, kind: "text_delta" | "thinking_delta"): string =>
  `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"${kind}","${
    kind === "text_delta" ? "text" : "thinking"
  }":`

const DELTA_TAIL = "}}\n\n"

// A thinking block carries `signature` from its start, as Anthropic's do (the Effect AI client requires the field).
// No `signature_delta` follows: the edge has no signature to give, and neither the SDK nor Claude Code needs one.
const THINKING_START = `{"type":"thinking","thinking":"","signature":""}`
const TEXT_START = `{"type":"text","text":""}`

const messageStart = (ctx: MessageContext): string =>
  frame(
    "message_start",
    JSON.stringify({
      type: "message_start",
      message: {
        id: ctx.id,
        type: "message",
        role: "assistant",
        model: ctx.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        // The upstream's counts are not known until the run ends (they are in `message_delta`): the estimate here.
        usage: { input_tokens: ctx.inputTokens ?? 0, output_tokens: 0 }
      }
    })
  ) + PING

/**
 * Renders one response's events; built once per response. Blocks are numbered from 0 in order; a block is stopped
 * when the next kind starts and before the terminal event. The terminal is `message_delta` + `message_stop`, or one
 * `error` event (after which Anthropic sends nothing); nothing is written after it.
 */
export const streamRenderer = (ctx: MessageContext): StreamRenderer => {
  let next = 0
  let open: "text" | "thinking" | undefined
  let head = ""
  let calledTools = false
  let done = false

  const close = (): string => {
    if (open === undefined) return ""
    open = undefined
    return blockStop(next - 1)
  }

  const delta = (kind: "text" | "thinking", text: string): string => {
    if (text === "") return ""
    let out = ""
    if (open !== kind) {
      out = close()
      const index = next++
      open = kind
      head = deltaHead(index, kind === "text" ? "text_delta" : "thinking_delta")
      out += blockStart(index, kind === "text" ? TEXT_START : THINKING_START)
    }
    return out + head + JSON.stringify(text) + DELTA_TAIL
  }

  const toolUse = (call: ToolCall): string => {
    const index = next++
    const input = toolInput(call.arguments)
    return blockStart(
      index,
      `{"type":"tool_use","id":${JSON.stringify(toolUseId(call.id))},"name":${JSON.stringify(call.name)},"input":{}}`
    ) +
      frame(
        "content_block_delta",
        `{"type":"content_block_delta","index":${index},"delta":{"type":"input_json_delta","partial_json":${
          JSON.stringify(input.json)
        }}}`
      ) +
      blockStop(index)
  }

  const one = (e: Emission): string => {
    switch (e._tag) {
      case "Content":
        return delta("text", e.text)
      case "Reasoning":
        return delta("thinking", e.text)
      case "ToolCalls": {
        let out = close()
        for (const call of e.calls) out += toolUse(call)
        calledTools ||= e.calls.length > 0
        return out
      }
      case "Finish": {
        done = true
        const usage = JSON.stringify(anthropicUsage(e.usage))
        return close() +
          frame(
            "message_delta",
            `{"type":"message_delta","delta":{"stop_reason":"${
              stopReason(e.finishReason, calledTools)
            }","stop_sequence":null},"usage":${usage}}`
          ) +
          frame("message_stop", `{"type":"message_stop"}`)
      }
      case "Error":
        done = true
        return close() + frame("error", JSON.stringify({ type: "error", error: streamError(e.error) }))
    }
  }

  return {
    head: messageStart(ctx),
    keepAlive: PING,
    batch: (emissions) => {
      let text = ""
      for (const e of emissions) {
        if (done) break
        text += one(e)
      }
      return text
    }
  }
}

/** The non-stream `message` of a finished session (thinking, text, then tool_use blocks), or its terminal error. */
export const message = (ctx: MessageContext, emissions: ReadonlyArray<Emission>): Rendered => {
  let text = ""
  let thinking = ""
  const calls: Array<ToolCall> = []
  for (const e of emissions) {
    switch (e._tag) {
      case "Content":
        text += e.text
        break
      case "Reasoning":
        thinking += e.text
        break
      case "ToolCalls":
        calls.push(...e.calls)
        break
      case "Error":
        return { _tag: "Error", error: e.error }
      case "Finish": {
        const content: Array<unknown> = []
        if (thinking !== "") content.push({ type: "thinking", thinking, signature: "" })
        // An answer with nothing in it still has its (empty) text block: callers read `content[0].text`.
        if (text !== "" || (thinking === "" && calls.length === 0)) content.push({ type: "text", text })
        for (const c of calls) {
          content.push({ type: "tool_use", id: toolUseId(c.id), name: c.name, input: toolInput(c.arguments).value })
        }
        return {
          _tag: "Body",
          body: {
            id: ctx.id,
            type: "message",
            role: "assistant",
            model: ctx.model,
            content,
            stop_reason: stopReason(e.finishReason, calls.length > 0),
            stop_sequence: null,
            usage: anthropicUsage(e.usage)
          }
        }
      }
    }
  }
  // Unreachable for a session's output, which always ends with a terminal emission.
  return { _tag: "Error", error: new RunFailed({ reason: "run ended without an outcome" }) }
}
