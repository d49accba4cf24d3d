/**
 * The typed Chat Completions API (public): the service, its prepared request, and every type its signatures name.
 * The service is built by `typedApi.ts`; the HTTP dialect is `dialect.ts`.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { ModelNotFound } from "../../chat/errors.js"
import type { InvalidRequest } from "../../chat/EdgeError.js"
import type { ResponseError } from "../../chat/Gateway.js"
import type { NoNodeForModel } from "../../protocol/errors.js"
import type { ChatCompletion, ChatCompletionChunk } from "./completion.js"
import type { PreparedRequest } from "./prepared.js"
import type { ChatCompletionRequest } from "./wire.js"

// Every type of the typed API's signatures, by name, beside the service.
export * from "./completion.js"
export { ChatCompletionRequest } from "./wire.js"
export { PreparedRequest } from "./prepared.js"
export type { RateLimited } from "../../chat/EdgeError.js"
export type { RunOutcomeError } from "../../chat/errors.js"
export type { ResponseError } from "../../chat/Gateway.js"
export type { SubmitError } from "../../protocol/errors.js"

/** Why a request built in code cannot become a run: a bad field, an unknown model, no live node for it. */
export type RequestError = InvalidRequest | ModelNotFound | NoNodeForModel

export declare namespace ChatCompletions {
  export interface Service {
    /**
     * A Chat Completions request built in code, prepared: its model (an id or an alias) looked up, the same
     * checks and output policy as `POST /v1/chat/completions`. `stream` in the request is ignored
     * by `create` and `stream`, which say how the run is answered.
     */
    readonly request: (
      wire: ChatCompletionRequest
    ) => Effect.Effect<PreparedRequest, RequestError>
    /**
     * Runs to the end (with the strict retries of a non-stream request) and returns the `chat.completion`. The
     * run's failure, its submission's, or the edge's concurrency limit (`RateLimited`), is the typed error.
     * Interrupting it cancels the run.
     */
    readonly create: (request: PreparedRequest) => Effect.Effect<ChatCompletion, ResponseError>
    /**
     * The `chat.completion.chunk`s as the run produces them, starting with the role chunk (strict-buffered models:
     * once the run was collected and validated). A run that fails, before or after output, fails the stream with
     * its typed error. The run lives in the stream's scope: closing or interrupting the stream cancels it.
     */
    readonly stream: (request: PreparedRequest) => Stream.Stream<ChatCompletionChunk, ResponseError>
  }
}

/** Chat Completions for Effect callers: typed requests, completions and chunks, over the edge's one response path. */
export class ChatCompletions extends Context.Tag("@iop/edge/ChatCompletions")<
  ChatCompletions,
  ChatCompletions.Service
>() {}

/** `ChatCompletions.request` of the service in context. */
export const request = (wire: ChatCompletionRequest) => Effect.flatMap(ChatCompletions, (c) => c.request(wire))

/** `ChatCompletions.create` of the service in context. */
export const create = (request: PreparedRequest) => Effect.flatMap(ChatCompletions, (c) => c.create(request))

/** `ChatCompletions.stream` of the service in context. */
export const stream = (request: PreparedRequest) => Stream.unwrap(Effect.map(ChatCompletions, (c) => c.stream(request)))
