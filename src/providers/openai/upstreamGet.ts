/**
 * One bounded `GET` of a JSON document beside an upstream's API (llama.cpp's `/props`, vLLM's `/version`, Ollama's
 * `/api/version`), for what the upstream says of itself. Never fails: an answer that is not a 200 JSON document is
 * `Other` (a definite "not here"), no answer in time or a transport failure is `Unreachable` (nothing known).
 */
import type * as Undici from "@effect/platform-node/Undici"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"

/** A props document carries a chat template of a few KiB; a document past this is not one to read. */
const MAX_DOCUMENT_BYTES = 4 * 1024 * 1024

export type GetAnswer =
  | { readonly _tag: "Json"; readonly json: unknown; readonly server: string | undefined }
  /** Answered, but not with a 200 JSON document. */
  | { readonly _tag: "Other"; readonly status: number; readonly server: string | undefined }
  /** No answer: `timedOut` when none came in time, else the transport failed (refused, reset). */
  | { readonly _tag: "Unreachable"; readonly timedOut: boolean }

export interface GetTarget {
  readonly apiKey: Redacted.Redacted<string> | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}

const headerText = (value: string | ReadonlyArray<string> | undefined): string | undefined =>
  typeof value === "string" ? value : value?.[0]

const parsed = (text: string): Option.Option<unknown> => {
  try {
    return Option.some(JSON.parse(text))
  } catch {
    return Option.none()
  }
}

export const getJson = (
  dispatcher: Undici.Dispatcher,
  url: URL,
  target: GetTarget,
  timeout: Duration.DurationInput
): Effect.Effect<GetAnswer> => {
  const headers: Record<string, string> = { accept: "application/json", ...target.headers }
  if (target.apiKey !== undefined) headers["authorization"] = `Bearer ${Redacted.value(target.apiKey)}`
  return Effect.tryPromise(async (signal): Promise<GetAnswer> => {
    const response = await dispatcher.request({ origin: url.origin, path: url.pathname, method: "GET", headers, signal })
    const server = headerText(response.headers["server"])
    if (response.statusCode !== 200) {
      await response.body.dump()
      return { _tag: "Other", status: response.statusCode, server }
    }
    const text = await response.body.text()
    const json = text.length > MAX_DOCUMENT_BYTES ? Option.none() : parsed(text)
    return Option.isSome(json) ? { _tag: "Json", json: json.value, server } : { _tag: "Other", status: 200, server }
  }).pipe(
    Effect.timeoutOption(timeout),
    Effect.map(Option.getOrElse((): GetAnswer => ({ _tag: "Unreachable", timedOut: true }))),
    Effect.orElseSucceed((): GetAnswer => ({ _tag: "Unreachable", timedOut: false }))
  )
}
