import type { ChatMessage, ContentPart as ChatPart, MessageContent, MessageToolCall } from "../../protocol/SubmitRunRequest.js"
import type { Content, ContentPart, InputItem } from "./wire.js"

/**
 * Responses input items → Chat Completions messages (PURE). Items map one to one, except where Chat Completions
 * groups what Responses keeps apart:
 * - `function_call` items right after an assistant message (or after each other) are that message's `tool_calls`;
 * - `reasoning` items become the `reasoning_content` of the assistant turn that follows them (the edge relays
 *   `reasoning_content` in history, as it does for Chat Completions clients); one followed by anything but an
 *   assistant turn (a user, system or tool message, or nothing) is dropped;
 * - images and files in a tool's output go into a user message right after that turn's tool results (a Chat
 *   Completions tool message holds text only, and nothing may sit between the tool results of one turn);
 * - `custom_tool_call` (a freeform tool, e.g. Codex's `apply_patch` on OpenAI's models) is a function call with
 *   arguments `{"input": ...}`, and its output a tool result, so a conversation begun elsewhere keeps its history;
 * - every other item type (web_search_call, local_shell_call, mcp_call, ...) is dropped: the edge forwards no such
 *   tool, and its results are the provider's, not in the item.
 */

interface Draft {
  readonly role: ChatMessage["role"]
  readonly content: MessageContent | undefined
  readonly toolCalls: Array<MessageToolCall>
  readonly toolCallId: string | undefined
  reasoning: string
}

/** A tool result with no text of its own: its images follow in the next user message. */
export const ATTACHED_BELOW = "(the output is attached in the next message)"

const chatPart = (part: ContentPart): ChatPart => {
  switch (part.type) {
    case "input_text":
    case "output_text":
      return { type: "text", text: part.text }
    case "refusal":
      return { type: "refusal", refusal: part.refusal }
    case "input_image":
      return {
        type: "image_url",
        image_url: { url: part.image_url ?? "", ...(part.detail != null ? { detail: part.detail } : {}) }
      }
    case "input_file":
      return {
        type: "file",
        file: { file_data: part.file_data ?? "", ...(part.filename != null ? { filename: part.filename } : {}) }
      }
  }
}

/** A single text part is sent as a string (what every upstream accepts); anything else as parts. */
const chatContent = (content: Content): MessageContent => {
  if (typeof content === "string") return content
  const only = content.length === 1 ? content[0] : undefined
  if (only !== undefined && (only.type === "input_text" || only.type === "output_text")) return only.text
  if (content.length === 0) return ""
  return content.map(chatPart)
}

const isText = (p: ContentPart): boolean => p.type === "input_text" || p.type === "output_text" || p.type === "refusal"

/** A tool output: its text for the tool message, its images and files for the user message after the turn. */
const toolOutput = (output: Content): { readonly text: MessageContent; readonly attached: ReadonlyArray<ChatPart> } => {
  if (typeof output === "string") return { text: output, attached: [] }
  const text = output.filter(isText)
  const attached = output.filter((p) => !isText(p)).map(chatPart)
  return { text: text.length === 0 ? (attached.length > 0 ? ATTACHED_BELOW : "") : chatContent(text), attached }
}

const reasoningText = (item: Extract<InputItem, { _tag: "Reasoning" }>["item"]): string => {
  const content = (item.content ?? []).map((p) => p.text).filter((t) => t !== "")
  const parts = content.length > 0 ? content : (item.summary ?? []).map((p) => p.text).filter((t) => t !== "")
  return parts.join("\n\n")
}

const joinText = (a: string, b: string): string => (a === "" ? b : b === "" ? a : `${a}\n\n${b}`)

const toMessage = (d: Draft): ChatMessage => ({
  role: d.role,
  ...(d.content !== undefined ? { content: d.content } : {}),
  ...(d.toolCalls.length > 0 ? { tool_calls: d.toolCalls } : {}),
  ...(d.toolCallId !== undefined ? { tool_call_id: d.toolCallId } : {}),
  ...(d.reasoning !== "" ? { reasoning_content: d.reasoning } : {})
})

export const toChatMessages = (
  instructions: string | undefined,
  items: ReadonlyArray<InputItem>
): ReadonlyArray<ChatMessage> => {
  const drafts: Array<Draft> = []
  const draft = (role: ChatMessage["role"], content: MessageContent | undefined, toolCallId?: string): Draft => {
    const d: Draft = { role, content, toolCalls: [], toolCallId, reasoning: "" }
    drafts.push(d)
    return d
  }
  if (instructions !== undefined && instructions !== "") draft("system", instructions)
  let reasoning = ""
  let attached: Array<ChatPart> = []

  const flushAttached = () => {
    if (attached.length > 0) draft("user", attached)
    attached = []
  }
  /** An assistant turn's tool call: on the assistant message just before it, or on a new one. */
  const call = (toolCall: MessageToolCall) => {
    const last = drafts[drafts.length - 1]
    const turn = last !== undefined && last.role === "assistant" ? last : draft("assistant", null)
    turn.toolCalls.push(toolCall)
    turn.reasoning = joinText(turn.reasoning, reasoning)
    reasoning = ""
  }
  const result = (callId: string, output: Content) => {
    const out = toolOutput(output)
    draft("tool", out.text, callId)
    attached = [...attached, ...out.attached]
    reasoning = ""
  }

  for (const entry of items) {
    if (entry._tag !== "FunctionCallOutput" && entry._tag !== "CustomToolCallOutput") flushAttached()
    switch (entry._tag) {
      case "Message": {
        const d = draft(entry.item.role, chatContent(entry.item.content))
        if (entry.item.role === "assistant") d.reasoning = reasoning
        reasoning = ""
        break
      }
      case "FunctionCall":
        call({ id: entry.item.call_id, type: "function", function: { name: entry.item.name, arguments: entry.item.arguments } })
        break
      case "CustomToolCall":
        call({
          id: entry.item.call_id,
          type: "function",
          function: { name: entry.item.name, arguments: JSON.stringify({ input: entry.item.input }) }
        })
        break
      case "FunctionCallOutput":
      case "CustomToolCallOutput":
        result(entry.item.call_id, entry.item.output)
        break
      case "Reasoning":
        reasoning = joinText(reasoning, reasoningText(entry.item))
        break
      // References are resolved before the translation (request.ts refuses those that were not).
      case "Reference":
      case "Other":
        break
    }
  }
  flushAttached()
  return drafts.map(toMessage)
}
