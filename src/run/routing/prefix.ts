import type { ChatMessage, SubmitRunRequest } from "../../protocol/SubmitRunRequest.js"

/**
 * A request's prompt as the upstream will read it, cut in blocks — its leading system (or developer) messages, its
 * tools, then each other message in order — each block's hash chained on the one before: two requests share their
 * first `k` hashes exactly when they share their first `k` blocks, so a match in the affinity index is a prefix
 * match (not a match of the first message alone). Hashed once per run, from the request's own strings (no
 * serialisation of the messages; the tools are serialised once, as JSON).
 *
 * The hash is 53 bits (two 32-bit multiply-xor lanes, cyrb53's mixing), seeded with the model: a collision
 * misroutes a request (a cold prefix), never anything else.
 */
export type PrefixBlocks = ReadonlyArray<number>

/** Two 32-bit lanes, carried from one string to the next of a block and from one block to the next. */
interface Lanes {
  h1: number
  h2: number
}

const feed = (lanes: Lanes, text: string): void => {
  let h1 = lanes.h1
  let h2 = lanes.h2
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    h1 = Math.imul(h1 ^ c, 2654435761)
    h2 = Math.imul(h2 ^ c, 1597334677)
  }
  // A separator, so that ("ab", "c") and ("a", "bc") differ.
  lanes.h1 = Math.imul(h1 ^ 0x1f, 2654435761)
  lanes.h2 = Math.imul(h2 ^ 0x1f, 1597334677)
}

/** The block's hash (cyrb53's finish), which also seeds the next block. */
const close = (lanes: Lanes): number => {
  let h1 = lanes.h1
  let h2 = lanes.h2
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507)
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507)
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  lanes.h1 = h1
  lanes.h2 = h2
  return 4294967296 * (2097151 & h2) + (h1 >>> 0)
}

const feedContent = (lanes: Lanes, content: ChatMessage["content"]): void => {
  if (content === undefined || content === null) return feed(lanes, "")
  if (typeof content === "string") return feed(lanes, content)
  for (const part of content) {
    const text = part["text"]
    // Text parts by their text; anything else (an image, audio) as it is sent.
    feed(lanes, typeof text === "string" && part.type === "text" ? text : JSON.stringify(part))
  }
}

const feedMessage = (lanes: Lanes, m: ChatMessage): void => {
  feed(lanes, m.role)
  if (m.name !== undefined) feed(lanes, m.name)
  if (m.tool_call_id !== undefined) feed(lanes, m.tool_call_id)
  feedContent(lanes, m.content)
  if (m.reasoning_content !== undefined) feed(lanes, m.reasoning_content)
  for (const call of m.tool_calls ?? []) {
    feed(lanes, call.id)
    feed(lanes, call.function.name)
    feed(lanes, call.function.arguments)
  }
}

const isInstruction = (m: ChatMessage): boolean => m.role === "system" || m.role === "developer"

/** A prompt's blocks, and how many lead it that every conversation of the same agent shares (its instructions, tools). */
export interface PromptBlocks {
  readonly blocks: PrefixBlocks
  /** The leading system/developer messages and the tools: a match no deeper than this is not of the conversation. */
  readonly shared: number
}

/** The chained block hashes of `request`'s prompt (see above); empty for an empty prompt. */
export const prefixBlocks = (request: Pick<SubmitRunRequest, "model" | "messages" | "tools">): PrefixBlocks =>
  promptBlocks(request).blocks

export const promptBlocks = (request: Pick<SubmitRunRequest, "model" | "messages" | "tools">): PromptBlocks => {
  const lanes: Lanes = { h1: 0xdeadbeef, h2: 0x41c6ce57 }
  feed(lanes, request.model)
  close(lanes)
  const blocks: Array<number> = []
  const messages = request.messages
  let i = 0
  for (; i < messages.length; i++) {
    const m = messages[i]!
    if (!isInstruction(m)) break
    feedMessage(lanes, m)
    blocks.push(close(lanes))
  }
  if (request.tools.length > 0) {
    feed(lanes, JSON.stringify(request.tools))
    blocks.push(close(lanes))
  }
  const shared = blocks.length
  for (; i < messages.length; i++) {
    feedMessage(lanes, messages[i]!)
    blocks.push(close(lanes))
  }
  return { blocks, shared }
}
