import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import type { ChatRequest } from "../../chat/ChatRequest.js"
import type { ModelNotFound } from "../../chat/errors.js"
import type { InvalidRequest } from "../../chat/EdgeError.js"
import { Gateway, type ResponseError } from "../../chat/Gateway.js"
import { withinDepth } from "../jsonBody.js"
import { toHttpError } from "../openaiError.js"
import { openAiModelList } from "../openaiModels.js"
import type { NoNodeForModel } from "../../protocol/errors.js"
import { type Dialect, type RunInfo, runIdSuffix } from "../Dialect.js"
import type { ChatCompletion, ChatCompletionChunk } from "./completion.js"
import * as Render from "./render.js"
import { decodeBody, toChatRequest } from "./request.js"
import type { ChatCompletionRequest } from "./wire.js"

// Every type of the typed API's signatures, by name, beside the service.
export * from "./completion.js"
export { ChatCompletionRequest } from "./wire.js"
export type { ChatRequest } from "../../chat/ChatRequest.js"
export type { RateLimited } from "../../chat/EdgeError.js"
export type { RunOutcomeError } from "../../chat/errors.js"
export type { ResponseError } from "../../chat/Gateway.js"
export type { SubmitError } from "../../protocol/errors.js"

/** What the Chat Completions renderers need of a request; `model` is the name the response carries. */
export const renderContext = (request: ChatRequest, model: string, run: RunInfo): Render.ResponseContext => ({
  id: `chatcmpl-${runIdSuffix(run)}`,
  created: run.created,
  model,
  reasoningField: request.policy.reasoningField,
  includeUsage: request.includeUsage,
  logprobs: request.submit.sampling.logprobs === true
})

/** OpenAI Chat Completions: `POST /v1/chat/completions`. */
export const dialect: Dialect<ChatCompletionRequest> = {
  api: "chat_completions",
  path: "/v1/chat/completions",
  // The default shape of the routes every API shares.
  speaks: () => false,
  modelList: openAiModelList,
  endpoints: [],
  decode: decodeBody,
  model: (wire) => wire.model,
  toChatRequest,
  streamRenderer: (wire, request, run) => Render.chunkRenderer(renderContext(request, wire.model, run)),
  body: (wire, request, run, emissions) => Render.completion(renderContext(request, wire.model, run), emissions),
  error: toHttpError
}

/** Why a request built in code cannot become a run: a bad field, an unknown model, no live node for it. */
export type RequestError = InvalidRequest | ModelNotFound | NoNodeForModel

export declare namespace ChatCompletions {
  export interface Service {
    /**
     * The chat plane's request for a Chat Completions request built in code: its model (an id or an alias) looked
     * up, the same checks and output policy as `POST /v1/chat/completions`. `stream` in the request is ignored
     * by `create` and `stream`, which say how the run is answered.
     */
    readonly request: (
      wire: ChatCompletionRequest
    ) => Effect.Effect<ChatRequest, RequestError>
    /**
     * Runs to the end (with the strict retries of a non-stream request) and returns the `chat.completion`. The
     * run's failure, its submission's, or the edge's concurrency limit (`RateLimited`), is the typed error.
     * Interrupting it cancels the run.
     */
    readonly create: (request: ChatRequest) => Effect.Effect<ChatCompletion, ResponseError>
    /**
     * The `chat.completion.chunk`s as the run produces them, starting with the role chunk (strict-buffered models:
     * once the run was collected and validated). A run that fails, before or after output, fails the stream with
     * its typed error. The run lives in the stream's scope: closing or interrupting the stream cancels it.
     */
    readonly stream: (request: ChatRequest) => Stream.Stream<ChatCompletionChunk, ResponseError>
  }
}

/** Chat Completions for Effect callers: typed requests, completions and chunks, over the edge's one response path. */
export class ChatCompletions extends Context.Tag("@iop/edge/ChatCompletions")<
  ChatCompletions,
  ChatCompletions.Service
>() {}

export const make = Effect.gen(function* () {
  const gateway = yield* Gateway

  // A request built in code is held to the body's depth limit too: nothing below recurses over a deeper one.
  const request: ChatCompletions.Service["request"] = (wire) =>
    Effect.flatMap(withinDepth(wire), (checked) =>
      Effect.flatMap(gateway.model(checked.model), (model) => toChatRequest(checked, model, gateway.requestLimits)))

  // Through the same door as the HTTP routes: the edge's concurrency limit and the config's log level apply.
  const create: ChatCompletions.Service["create"] = (request) =>
    gateway.complete(request, (run, emissions) =>
      Render.completion(renderContext(request, request.submit.model, run), emissions)).pipe(
        Effect.scoped,
        Effect.withSpan("ChatCompletions.create")
      )

  const stream: ChatCompletions.Service["stream"] = (request) =>
    gateway.items(request, (run) => Render.chunkBuilder(renderContext(request, request.submit.model, run))).pipe(
      Stream.withSpan("ChatCompletions.stream")
    )

  return { request, create, stream } satisfies ChatCompletions.Service
})

export const ChatCompletionsLive: Layer.Layer<ChatCompletions, never, Gateway> = Layer.effect(ChatCompletions, make)

/** `ChatCompletions.request` of the service in context. */
export const request = (wire: ChatCompletionRequest) => Effect.flatMap(ChatCompletions, (c) => c.request(wire))

/** `ChatCompletions.create` of the service in context. */
export const create = (request: ChatRequest) => Effect.flatMap(ChatCompletions, (c) => c.create(request))

/** `ChatCompletions.stream` of the service in context. */
export const stream = (request: ChatRequest) => Stream.unwrap(Effect.map(ChatCompletions, (c) => c.stream(request)))
