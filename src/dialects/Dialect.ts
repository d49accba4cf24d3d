import type * as Either from "effect/Either"
import type { ChatRequestLimits, DialectRequest } from "../chat/buildChatRequest.js"
import type { Emission } from "../chat/session.js"
import type { ModelOptions } from "../protocol/ModelOptions.js"
import type { EdgeError, InvalidRequest } from "../chat/EdgeError.js"
import type { Api } from "../protocol/Api.js"

/**
 * An API the edge speaks. A dialect is pure: a request translator (its wire request → the chat plane's
 * request) and renderers (the session's emissions → its stream events and final body; every error → its error
 * shape). Everything else — tool-call parsing, validation and retries, reasoning, sentinels, timeouts,
 * cancellation, usage, keys, limits, metrics — lives below the dialects (`Responder`, the chat and run planes).
 */

export type { Api } from "../protocol/Api.js"

export type { EdgeError } from "../chat/EdgeError.js"

/** An error answered before any response was written: status, body (the API's shape) and headers. */
export interface ErrorAnswer {
  readonly status: number
  readonly body: unknown
  readonly headers?: Readonly<Record<string, string>>
}

export {
  type ItemRenderer,
  KEEP_ALIVE_AFTER_MS,
  type Rendered,
  type RunInfo,
  runIdSuffix,
  SSE_COMMENT_KEEP_ALIVE,
  type StreamRenderer
} from "../chat/Rendering.js"
import type { Rendered, RunInfo, StreamRenderer } from "../chat/Rendering.js"

/**
 * An endpoint an API has beside its main one (Anthropic's `count_tokens`): the same guard and body limit, its body
 * decoded, the model it names checked at the door (it must exist for the caller), then answered without a run.
 */
/** A route's path (the router's `PathInput`: it starts with `/`). */
export type RoutePath = `/${string}`

export interface DialectEndpoint {
  readonly path: RoutePath
  /** The body decoded: the model it names, and the answer (computed once the model was allowed). */
  readonly handle: (
    body: string
  ) => Either.Either<{ readonly model: string; readonly answer: () => unknown }, InvalidRequest>
}

export interface Dialect<W> {
  readonly api: Api
  /** Where it is served (`POST`). */
  readonly path: RoutePath
  /**
   * Whether a request to a route every API shares (the model list, a route the edge does not have) speaks this
   * API, by its headers; the first dialect that says so answers it in its shape (else Chat Completions').
   */
  readonly speaks: (headers: Readonly<Record<string, string | undefined>>) => boolean
  /** `GET /v1/models` in this API's shape: the models the caller may use, ids and aliases. */
  readonly modelList: (names: ReadonlyArray<string>) => unknown
  /** `GET /v1/models/{id}` in this API's shape: one model (an id or an alias), as the list has it. */
  readonly modelEntry: (name: string) => unknown
  /** Its endpoints beside `path`. */
  readonly endpoints: ReadonlyArray<DialectEndpoint>
  /** Parses and decodes the body; an error names the offending field in a few hundred characters. */
  readonly decode: (body: string) => Either.Either<W, InvalidRequest>
  /** The model name the caller asked for (maybe an alias). */
  readonly model: (wire: W) => string
  readonly toChatRequest: (
    wire: W,
    model: ModelOptions,
    limits: ChatRequestLimits
  ) => Either.Either<DialectRequest, InvalidRequest>
  readonly streamRenderer: (wire: W, request: DialectRequest, run: RunInfo) => StreamRenderer
  readonly body: (wire: W, request: DialectRequest, run: RunInfo, emissions: ReadonlyArray<Emission>) => Rendered
  readonly error: (e: EdgeError) => ErrorAnswer
}
