import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as RunEvent from "../../protocol/RunEvent.js"
import type { ChatMessage, SubmitRunRequest } from "../../protocol/SubmitRunRequest.js"
import { fromStream, type Provider } from "../Provider.js"
import { echoTokens } from "./tokens.js"

/** The text of a message: its string content, or its text parts joined. */
export const messageText = (message: ChatMessage): string => {
  const content = message.content
  if (typeof content === "string") return content
  if (content === null || content === undefined) return ""
  return content
    .map((part) => (part.type === "text" && typeof part["text"] === "string" ? part["text"] : ""))
    .join("")
}

const lastUserText = (request: SubmitRunRequest): string => {
  for (let i = request.messages.length - 1; i >= 0; i--) {
    const m = request.messages[i]
    if (m !== undefined && m.role === "user") return messageText(m)
  }
  return ""
}

/**
 * The built-in model: streams the last user message back token by token
 * (`max_tokens` truncates with `finish_reason: length`), and reports usage
 * counted with the same tokenizer.
 */
export const make = (options: { readonly tokenDelayMs: number }): Provider =>
  fromStream((request) =>
    Stream.suspend(() => {
      const all = echoTokens(lastUserText(request))
      const limit = request.sampling.maxTokens
      const tokens = limit !== undefined && limit < all.length ? all.slice(0, limit) : all
      const inputTokens = request.messages.reduce((n, m) => n + echoTokens(messageText(m)).length, 0)
      const done = RunEvent.complete({
        finishReason: tokens.length < all.length ? "length" : "stop",
        toolCalls: [],
        usage: { inputTokens, outputTokens: tokens.length },
        metadata: {}
      })
      const deltas = Stream.fromIterable(tokens).pipe(Stream.map(RunEvent.delta))
      const paced =
        options.tokenDelayMs > 0
          ? deltas.pipe(Stream.tap(() => Effect.sleep(Duration.millis(options.tokenDelayMs))))
          : deltas
      return paced.pipe(Stream.concat(Stream.make(done)))
    })
  )
