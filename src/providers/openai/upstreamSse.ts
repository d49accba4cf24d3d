import { createParser } from "eventsource-parser"
import { decodeEvent, type UpstreamInput } from "./upstreamWire.js"

/**
 * The upstream SSE byte stream (as decoded text) → decoded upstream events.
 * A thin wrapper over `eventsource-parser`: `feed` takes the next piece of
 * text, however it was split, and returns the events it completed. It holds
 * the parser's buffer, so make one per upstream response.
 */
export interface UpstreamDecoder {
  readonly feed: (text: string) => ReadonlyArray<UpstreamInput>
}

/** The longest event (or unterminated line) accepted, in characters. */
export const DEFAULT_MAX_EVENT_CHARS = 8 * 1024 * 1024

export const makeUpstreamDecoder = (options?: { readonly maxEventChars?: number }): UpstreamDecoder => {
  const maxEventChars = options?.maxEventChars ?? DEFAULT_MAX_EVENT_CHARS
  let pending: Array<UpstreamInput> = []
  let terminated = false
  const parser = createParser({
    maxBufferSize: maxEventChars,
    onEvent: (message) => {
      pending.push(decodeEvent(message.event, message.data))
    },
    onError: (error) => {
      if (error.type === "max-buffer-size-exceeded") {
        terminated = true
        pending.push({ _tag: "Malformed", message: `upstream sent an event longer than ${maxEventChars} characters` })
      } else if (error.type === "unknown-field" && error.field === "error") {
        // llama.cpp before 2025-09 wrote `error: {...}` lines instead of `data: {"error": {...}}`.
        pending.push(decodeEvent("error", error.value ?? ""))
      }
    }
  })
  return {
    feed: (text) => {
      // A terminated parser throws on feed; it has reported its failure already.
      if (terminated) return []
      parser.feed(text)
      const out = pending
      pending = []
      return out
    }
  }
}
