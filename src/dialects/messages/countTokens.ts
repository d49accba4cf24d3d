import { type ContentBlock, type CountTokensRequest, isKnownBlock } from "./wire.js"

/** `POST /v1/messages/count_tokens`'s answer (pure). */

/** What one image or PDF counts: Anthropic's figure for a ~1.15 megapixel image (its size is not decoded here). */
export const IMAGE_TOKENS = 1600

const CHARS_PER_TOKEN = 4

/**
 * An estimate of a request's input tokens (no tokenizer: the edge's models each have their own): one token per
 * four characters of the system prompt, every text, thinking text, tool call (name and input JSON) and tool result
 * of the messages and every forwarded tool's name, description and input schema JSON, rounded up, plus 1600 per
 * image or PDF document.
 */
export const estimateInputTokens = (wire: CountTokensRequest): number => {
  let chars = 0
  let media = 0
  const text = (t: string) => {
    chars += t.length
  }
  const block = (b: ContentBlock): void => {
    if (!isKnownBlock(b)) return
    switch (b.type) {
      case "text":
        return text(b.text)
      case "thinking":
        return text(b.thinking)
      case "tool_use":
        return text(b.name + JSON.stringify(b.input))
      case "image":
        media++
        return
      case "document":
        if (b.source.type === "text") text(b.source.data)
        else if (b.source.type === "content") {
          if (typeof b.source.content === "string") text(b.source.content)
          else for (const t of b.source.content) text(t.text)
        } else media++
        return
      case "tool_result":
        if (typeof b.content === "string") text(b.content)
        else for (const part of b.content ?? []) block(part)
        return
    }
  }
  if (typeof wire.system === "string") text(wire.system)
  else for (const b of wire.system ?? []) text(b.text)
  for (const m of wire.messages) {
    if (typeof m.content === "string") text(m.content)
    else for (const b of m.content) block(b)
  }
  for (const t of wire.tools ?? []) {
    if (t.type !== undefined && t.type !== null && t.type !== "custom") continue
    text(t.name + (t.description ?? "") + JSON.stringify(t.input_schema ?? {}))
  }
  return Math.max(1, Math.ceil(chars / CHARS_PER_TOKEN) + media * IMAGE_TOKENS)
}
