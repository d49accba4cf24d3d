import type * as Effect from "effect/Effect"
import type * as Either from "effect/Either"
import type { KeyPolicy } from "../chat/KeyPolicy.js"
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

/**
 * What an API keeps between requests (the Responses API's stored responses): the effects around its pure dialect,
 * a service of its folder, used by whoever serves the API (the routes serve it with `serve(dialect, state)`). A
 * dialect without one is stateless. A request that refers to nothing and keeps nothing costs it nothing but the
 * look at its fields.
 */
export interface DialectState<W> {
  /**
   * Before the translation, once the model was allowed: what the request refers to (earlier responses, their
   * items) put in its place, for the caller's key; a reference that is not kept is a 400 naming it.
   */
  readonly resolve: (wire: W, key: KeyPolicy | undefined) => Effect.Effect<W, EdgeError>
  /** A stream's renderer, in place of the dialect's: one that keeps its response before it ends (`settle`). */
  readonly streamRenderer: (wire: W, request: DialectRequest, run: RunInfo, key: KeyPolicy | undefined) => StreamRenderer
  /** The non-stream answer (the dialect's `body`), kept before it is sent: what is sent. */
  readonly keep: (wire: W, body: unknown, key: KeyPolicy | undefined) => Effect.Effect<unknown>
}
