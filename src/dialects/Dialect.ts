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
  SSE_COMMENT_KEEP_ALIVE,
  type StreamRenderer
} from "../chat/Rendering.js"
import type { Rendered, RunInfo, StreamRenderer } from "../chat/Rendering.js"

export interface Dialect<W> {
  readonly api: Api
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
