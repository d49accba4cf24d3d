/**
 * What an OpenAI-compatible upstream says of itself, for `toolFormats: "auto"` and `constraints: "auto"`: llama.cpp
 * answers `GET /props` (beside its `/v1`) with its `chat_template` and generation settings. Anything else (no such
 * route, not JSON, unreachable, slow) is "nothing known": the caller then keeps every format and no constraint.
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

/** What the upstream's `/props` says of it: its chat template, and whether it is llama.cpp's server. */
export interface UpstreamProps {
  readonly chatTemplate: string | undefined
  /** llama-server's props carry its generation settings: it takes a GBNF `grammar`. */
  readonly llamaCpp: boolean
}

const propsOf = (json: unknown): UpstreamProps | undefined => {
  if (typeof json !== "object" || json === null) return undefined
  const template = "chat_template" in json ? json.chat_template : undefined
  return {
    chatTemplate: typeof template === "string" && template !== "" ? template : undefined,
    llamaCpp: "default_generation_settings" in json || "chat_template" in json
  }
}

export const fetchProps = (options: {
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string> | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}): Effect.Effect<UpstreamProps | undefined, never, NodeHttpClient.Dispatcher> =>
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
      return propsOf(JSON.parse(text))
    }).pipe(
      Effect.timeoutOption(PROPS_TIMEOUT),
      Effect.map(Option.getOrUndefined),
      Effect.orElseSucceed(() => undefined)
    )
  })
