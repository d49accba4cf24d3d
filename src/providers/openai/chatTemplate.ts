/**
 * What an OpenAI-compatible upstream's `/props` says of it, for `toolFormats: "auto"` and the provider's
 * `constraints: "auto"`: llama.cpp answers `GET /props` (beside its `/v1`) with its `chat_template` and generation
 * settings. No such route, not JSON: `NoProps`; unreachable or slow: `Unreachable` (nothing known, the caller
 * keeps every format and may ask again later).
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Redacted from "effect/Redacted"
import { getJson, type GetAnswer } from "./upstreamGet.js"
import { rootOf } from "./upstreamKind.js"

/** Long enough for a busy server on loopback, short enough not to hold a node's start. */
const PROPS_TIMEOUT = Duration.seconds(5)

export const propsUrl = (baseUrl: string): URL | undefined => {
  const url = `${rootOf(baseUrl)}/props`
  return URL.canParse(url) ? new URL(url) : undefined
}

/** What the upstream's `/props` says of it: its chat template, and whether it is llama.cpp's server. */
export interface UpstreamProps {
  readonly chatTemplate: string | undefined
  /** llama-server's props carry its generation settings: it takes a GBNF `grammar`. */
  readonly llamaCpp: boolean
}

export type PropsAnswer =
  | { readonly _tag: "Props"; readonly props: UpstreamProps }
  | { readonly _tag: "NoProps" }
  | { readonly _tag: "Unreachable" }

export const propsOf = (json: unknown): UpstreamProps | undefined => {
  if (typeof json !== "object" || json === null) return undefined
  const template = "chat_template" in json ? json.chat_template : undefined
  return {
    chatTemplate: typeof template === "string" && template !== "" ? template : undefined,
    llamaCpp: "default_generation_settings" in json || "chat_template" in json
  }
}

/** A `/props` answer read: a server error (5xx, 429) is no answer yet, any other status a definite "none here". */
export const propsAnswer = (answer: GetAnswer): PropsAnswer => {
  switch (answer._tag) {
    case "Json": {
      const props = propsOf(answer.json)
      return props === undefined ? { _tag: "NoProps" } : { _tag: "Props", props }
    }
    case "Other":
      return answer.status >= 500 || answer.status === 429 ? { _tag: "Unreachable" } : { _tag: "NoProps" }
    case "Unreachable":
      return { _tag: "Unreachable" }
  }
}

export const fetchProps = (options: {
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string> | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}): Effect.Effect<PropsAnswer, never, NodeHttpClient.Dispatcher> =>
  Effect.flatMap(NodeHttpClient.Dispatcher, (dispatcher) => {
    const url = propsUrl(options.baseUrl)
    if (url === undefined) return Effect.succeed<PropsAnswer>({ _tag: "NoProps" })
    return Effect.map(getJson(dispatcher, url, options, PROPS_TIMEOUT), propsAnswer)
  })
