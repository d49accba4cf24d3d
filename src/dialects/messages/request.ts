import * as Either from "effect/Either"
import { buildChatRequest, type ChatRequestLimits, type DialectRequest } from "../../chat/buildChatRequest.js"
import type { ModelOptions } from "../../config/EdgeConfig.js"
import { clip } from "../../common/clip.js"
import { InvalidRequest } from "../../chat/EdgeError.js"
import { decodeJsonBody } from "../jsonBody.js"
import type { ChatMessage, ContentPart, FunctionTool, MessageToolCall, ToolChoice } from "../../protocol/SubmitRunRequest.js"
import { RAW_ARGUMENTS_KEY } from "./render.js"
import {
  type ContentBlock,
  type CountTokensRequest as CountTokensWire,
  CountTokensRequest,
  type DocumentBlock,
  type ImageBlock,
  type Message,
  MessagesRequest,
  type TextBlock,
  type Tool,
  type ToolChoice as WireToolChoice,
  type ToolResultBlock,
  type ToolUseBlock,
  isKnownBlock
} from "./wire.js"

/**
 * Anthropic Messages → the chat plane's request (pure). Messages and tools become OpenAI Chat Completions shapes
 * (what the providers pass on); what the edge cannot forward is refused with a 400 naming the field, or, when
 * leaving it out changes nothing the model could use (server tools, unknown block types), left out with a note.
 */

/** Parses and decodes the body (`/v1/messages`, `/v1/messages/count_tokens`); errors name the field. */
export const decodeBody = decodeJsonBody(MessagesRequest)
export const decodeCountTokens = decodeJsonBody(CountTokensRequest)

const refuse = (param: string, why: string): InvalidRequest => new InvalidRequest({ message: `${param}: ${why}`, param })

/** Claude Code's first system block: per-conversation metadata whose hash would defeat an upstream's prefix cache. */
const BILLING_HEADER = "x-anthropic-billing-header:"

const systemText = (system: string | ReadonlyArray<TextBlock>, notes: Array<string>): string => {
  if (typeof system === "string") return system
  const kept = system.filter((b) => !b.text.startsWith(BILLING_HEADER))
  if (kept.length < system.length) notes.push("system: the x-anthropic-billing-header block")
  return kept.map((b) => b.text).join("\n\n")
}

const imagePart = (block: ImageBlock, path: string): ContentPart | InvalidRequest => {
  switch (block.source.type) {
    case "base64":
      return { type: "image_url", image_url: { url: `data:${block.source.media_type};base64,${block.source.data}` } }
    case "url":
      return { type: "image_url", image_url: { url: block.source.url } }
    case "file":
      return refuse(`${path}.source`, "Files API sources are not supported: send the image as base64 or a URL")
  }
}

const documentParts = (block: DocumentBlock, path: string): ReadonlyArray<ContentPart> | InvalidRequest => {
  const source = block.source
  switch (source.type) {
    case "text":
      return [{ type: "text", text: source.data }]
    case "content":
      return typeof source.content === "string"
        ? [{ type: "text", text: source.content }]
        : source.content.map((b) => ({ type: "text", text: b.text }))
    case "base64":
      if (source.media_type !== "application/pdf") {
        return refuse(`${path}.source.media_type`, "a base64 document must be application/pdf")
      }
      // OpenAI's file content part.
      return [{
        type: "file",
        file: { filename: block.title ?? "document.pdf", file_data: `data:application/pdf;base64,${source.data}` }
      }]
    case "url":
    case "file":
      return refuse(`${path}.source`, `${source.type} document sources are not supported: send the document as base64 or text`)
  }
}

/** A call's arguments as the model wrote them: a non-object answer the renderer wrapped is unwrapped (render.ts). */
const argumentsOf = (block: ToolUseBlock): string => {
  const keys = Object.keys(block.input)
  const raw = block.input[RAW_ARGUMENTS_KEY]
  return keys.length === 1 && typeof raw === "string" ? raw : JSON.stringify(block.input)
}

/** A tool result's text and images; `is_error` prefixes `Error: ` so the model knows the call failed. */
const toolResult = (
  block: ToolResultBlock,
  path: string,
  notes: Array<string>
): { readonly message: ChatMessage; readonly images: ReadonlyArray<ContentPart> } | InvalidRequest => {
  const texts: Array<string> = []
  const images: Array<ContentPart> = []
  const content = block.content ?? ""
  if (typeof content === "string") texts.push(content)
  else {
    for (const [k, part] of content.entries()) {
      const at = `${path}.content[${k}]`
      if (!isKnownBlock(part)) {
        notes.push(`${at} (${clip(part.type, 64)})`)
        continue
      }
      switch (part.type) {
        case "text":
          texts.push(part.text)
          break
        case "image": {
          const image = imagePart(part, at)
          if (image instanceof InvalidRequest) return image
          images.push(image)
          break
        }
        case "document": {
          const parts = documentParts(part, at)
          if (parts instanceof InvalidRequest) return parts
          for (const p of parts) {
            if (p.type === "text" && typeof p.text === "string") texts.push(p.text)
            else return refuse(at, "a tool result may hold text documents only")
          }
          break
        }
      }
    }
  }
  const text = texts.join("\n")
  return {
    message: { role: "tool", tool_call_id: block.tool_use_id, content: block.is_error === true ? `Error: ${text}` : text },
    images
  }
}

/**
 * A user turn: its tool results first, as one `tool` message each (OpenAI wants them right after the assistant's
 * calls; Anthropic puts them first in the turn anyway), then one user message with the rest and any images the
 * tool results held (a `tool` message carries text only).
 */
const userTurn = (
  blocks: ReadonlyArray<ContentBlock>,
  path: string,
  out: Array<ChatMessage>,
  notes: Array<string>
): InvalidRequest | undefined => {
  const parts: Array<ContentPart> = []
  const fromTools: Array<ContentPart> = []
  for (const [j, block] of blocks.entries()) {
    const at = `${path}.content[${j}]`
    if (!isKnownBlock(block)) {
      notes.push(`${at} (${clip(block.type, 64)})`)
      continue
    }
    switch (block.type) {
      case "text":
        parts.push({ type: "text", text: block.text })
        break
      case "image": {
        const image = imagePart(block, at)
        if (image instanceof InvalidRequest) return image
        parts.push(image)
        break
      }
      case "document": {
        const more = documentParts(block, at)
        if (more instanceof InvalidRequest) return more
        parts.push(...more)
        break
      }
      case "tool_result": {
        const result = toolResult(block, at, notes)
        if (result instanceof InvalidRequest) return result
        out.push(result.message)
        if (result.images.length > 0) {
          fromTools.push({ type: "text", text: `Images returned by tool call ${block.tool_use_id}:` }, ...result.images)
        }
        break
      }
      case "tool_use":
      case "thinking":
      case "redacted_thinking":
        return refuse(at, `a ${block.type} block belongs in an assistant message`)
    }
  }
  const content = [...fromTools, ...parts]
  if (content.length === 0) return undefined
  const only = content.length === 1 ? content[0] : undefined
  out.push({ role: "user", content: only?.type === "text" && typeof only.text === "string" ? only.text : content })
  return undefined
}

/** An assistant turn: text, calls (arguments = the input's JSON), and thinking as `reasoning_content`. */
const assistantTurn = (
  blocks: ReadonlyArray<ContentBlock>,
  path: string,
  out: Array<ChatMessage>,
  notes: Array<string>
): InvalidRequest | undefined => {
  const texts: Array<string> = []
  const thinking: Array<string> = []
  const calls: Array<MessageToolCall> = []
  for (const [j, block] of blocks.entries()) {
    const at = `${path}.content[${j}]`
    if (!isKnownBlock(block) || block.type === "redacted_thinking") {
      // Server tool blocks, unknown types, and redacted thinking (encrypted for Anthropic's own models).
      notes.push(`${at} (${clip(block.type, 64)})`)
      continue
    }
    switch (block.type) {
      case "text":
        texts.push(block.text)
        break
      case "tool_use":
        calls.push({ id: block.id, type: "function", function: { name: block.name, arguments: argumentsOf(block) } })
        break
      case "thinking":
        if (block.thinking !== "") thinking.push(block.thinking)
        break
      case "image":
      case "document":
      case "tool_result":
        return refuse(at, `a ${block.type} block belongs in a user message`)
    }
  }
  out.push({
    role: "assistant",
    content: texts.length > 0 ? texts.join("\n") : calls.length > 0 ? null : "",
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
    ...(thinking.length > 0 ? { reasoning_content: thinking.join("\n") } : {})
  })
  return undefined
}

const systemTurn = (
  content: Message["content"],
  path: string,
  out: Array<ChatMessage>
): InvalidRequest | undefined => {
  if (typeof content === "string") {
    out.push({ role: "system", content })
    return undefined
  }
  const texts: Array<string> = []
  for (const [j, block] of content.entries()) {
    if (!isKnownBlock(block) || block.type !== "text") {
      return refuse(`${path}.content[${j}]`, "a system message holds text blocks only")
    }
    texts.push(block.text)
  }
  out.push({ role: "system", content: texts.join("\n\n") })
  return undefined
}

const turn = (m: Message, path: string, out: Array<ChatMessage>, notes: Array<string>): InvalidRequest | undefined => {
  if (m.role === "system") return systemTurn(m.content, path, out)
  if (typeof m.content === "string") {
    out.push({ role: m.role, content: m.content })
    return undefined
  }
  return m.role === "user" ? userTurn(m.content, path, out, notes) : assistantTurn(m.content, path, out, notes)
}

/** The request's system prompt and messages as Chat Completions messages (system prompt first). */
export const chatMessages = (
  wire: Pick<CountTokensWire, "system" | "messages">,
  notes: Array<string>
): Either.Either<ReadonlyArray<ChatMessage>, InvalidRequest> => {
  const out: Array<ChatMessage> = []
  if (wire.system !== undefined && wire.system !== null) {
    const text = systemText(wire.system, notes)
    if (text !== "") out.push({ role: "system", content: text })
  }
  for (const [i, m] of wire.messages.entries()) {
    const failed = turn(m, `messages[${i}]`, out, notes)
    if (failed !== undefined) return Either.left(failed)
  }
  return Either.right(out)
}

/** The caller's own tools as function tools (with where each sat); server tools are left out with a note. */
export const functionTools = (
  tools: ReadonlyArray<Tool>,
  notes: Array<string>
): Either.Either<ReadonlyArray<{ readonly tool: FunctionTool; readonly index: number }>, InvalidRequest> => {
  const out: Array<{ readonly tool: FunctionTool; readonly index: number }> = []
  for (const [i, t] of tools.entries()) {
    if (t.type !== undefined && t.type !== null && t.type !== "custom") {
      notes.push(`tools[${i}] (${clip(t.type, 64)})`)
      continue
    }
    if (t.input_schema === undefined || t.input_schema === null) {
      return Either.left(refuse(`tools[${i}].input_schema`, "missing (required)"))
    }
    out.push({
      index: i,
      tool: {
        type: "function",
        function: {
          name: t.name,
          ...(typeof t.description === "string" ? { description: t.description } : {}),
          parameters: t.input_schema
        }
      }
    })
  }
  return Either.right(out)
}

/** `auto` → auto, `any` → required, `tool` → that function, `none` → none; no tools: nothing to choose from. */
const toolChoiceOf = (choice: WireToolChoice | null | undefined, hasTools: boolean): ToolChoice | undefined => {
  if (choice === undefined || choice === null) return undefined
  switch (choice.type) {
    case "auto":
      return hasTools ? "auto" : undefined
    case "any":
      return hasTools ? "required" : undefined
    case "none":
      return hasTools ? "none" : undefined
    case "tool":
      // Checked against the tools by buildChatRequest, even when none are left.
      return { type: "function", function: { name: choice.name } }
  }
}

/** `enabled` and `adaptive` ask for the model's thinking; anything else hides it. */
export const thinkingShown = (wire: Pick<CountTokensWire, "thinking">): boolean =>
  wire.thinking?.type === "enabled" || wire.thinking?.type === "adaptive"

/** Anthropic's limit on `metadata.user_id`; a longer one is not forwarded (OpenAI's `user` has the same bound). */
const MAX_USER_CHARS = 256

/** A Messages request, its model resolved, as the chat plane's request. */
export const toChatRequest = (
  wire: MessagesRequest,
  model: ModelOptions,
  limits: ChatRequestLimits
): Either.Either<DialectRequest, InvalidRequest> => {
  const notes: Array<string> = []
  return Either.gen(function* () {
    const messages = yield* chatMessages(wire, notes)
    const tools = yield* functionTools(wire.tools ?? [], notes)
    const choice = wire.tool_choice
    const userId = wire.metadata?.user_id
    const format = wire.output_config?.format
    if (wire.top_k !== undefined && wire.top_k !== null) notes.push("top_k")
    const request = yield* buildChatRequest({
      api: "messages",
      model,
      messages,
      tools: tools.map((t) => t.tool),
      toolChoice: toolChoiceOf(choice, tools.length > 0),
      parallelToolCalls: choice !== undefined && choice !== null && choice.type !== "none" &&
          choice.disable_parallel_tool_use === true
        ? false
        : undefined,
      sampling: {
        maxTokens: wire.max_tokens,
        maxTokensField: "max_tokens",
        temperature: wire.temperature ?? undefined,
        topP: wire.top_p ?? undefined,
        stop: wire.stop_sequences !== undefined && wire.stop_sequences !== null && wire.stop_sequences.length > 0
          ? wire.stop_sequences
          : undefined,
        user: typeof userId === "string" && userId !== "" && userId.length <= MAX_USER_CHARS ? userId : undefined,
        // Structured output (Claude Code asks for its titles this way) as OpenAI's json_schema response format.
        responseFormat: format?.type === "json_schema" && format.schema !== undefined && format.schema !== null
          ? { type: "json_schema", json_schema: { name: "output", schema: format.schema } }
          : undefined
      },
      metadata: {},
      stream: wire.stream === true,
      includeUsage: true,
      reasoning: { includeReasoning: thinkingShown(wire) },
      ...(notes.length > 0 ? { notForwarded: { parts: clip(notes.join(", "), 500) } } : {}),
      params: {
        toolSchema: (i) => `tools[${tools[i]?.index ?? i}].input_schema`,
        toolChoice: "tool_choice"
      }
    }, limits)
    return request
  })
}
