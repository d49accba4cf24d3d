/**
 * The chat template an OpenAI-compatible upstream serves, for `toolFormats: "auto"`: llama.cpp answers
 * `GET /props` (beside its `/v1`) with `chat_template`. Anything else (no such route, not JSON, unreachable,
 * slow) is "no template": the caller then keeps every format.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"

/** Long enough for a busy server on loopback, short enough not to hold a node's start. */
const PROPS_TIMEOUT = Duration.seconds(5)
/** A template is a few KiB; a props document past this is not one to read. */
const MAX_PROPS_BYTES = 4 * 1024 * 1024

export const propsUrl = (baseUrl: string): URL | undefined => {
  const root = baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "")
  return URL.canParse(`${root}/props`) ? new URL(`${root}/props`) : undefined
}

const templateOf = (json: unknown): string | undefined => {
  if (typeof json !== "object" || json === null || !("chat_template" in json)) return undefined
  const template = json.chat_template
  return typeof template === "string" && template !== "" ? template : undefined
}

export const fetchChatTemplate = (options: {
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string> | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}): Effect.Effect<string | undefined, never, NodeHttpClient.Dispatcher> =>
  Effect.flatMap(NodeHttpClient.Dispatcher, (dispatcher) => {
    const url = propsUrl(options.baseUrl)
    if (url === undefined) return Effect.succeed(undefined)
    const headers: Record<string, string> = { accept: "application/json", ...options.headers }
    if (options.apiKey !== undefined) headers["authorization"] = `Bearer ${Redacted.value(options.apiKey)}`
    return Effect.tryPromise(async (signal) => {
      const response = await dispatcher.request({
        origin: url.origin,
        path: url.pathname,
        method: "GET",
        headers,
        signal
      })
      if (response.statusCode !== 200) {
        await response.body.dump()
        return undefined
      }
      const text = await response.body.text()
      if (text.length > MAX_PROPS_BYTES) return undefined
      return templateOf(JSON.parse(text))
    }).pipe(
      Effect.timeoutOption(PROPS_TIMEOUT),
      Effect.map(Option.getOrUndefined),
      Effect.orElseSucceed(() => undefined)
    )
  })
