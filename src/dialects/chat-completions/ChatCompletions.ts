import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import type { ChatRequest } from "../../chat/ChatRequest.js"
import type { ModelNotFound, RunOutcomeError } from "../../chat/errors.js"
import { resolveModel } from "../../chat/resolveModel.js"
import { EdgeConfig } from "../../config/EdgeConfig.js"
import type { InvalidRequest } from "../../chat/EdgeError.js"
import { toHttpError } from "../openaiError.js"
import * as Logging from "../../observability/Logging.js"
import type { NoNodeForModel, SubmitError } from "../../protocol/errors.js"
import { NodeRegistry } from "../../run/NodeRegistry.js"
import { type Dialect, type RunInfo, runIdSuffix } from "../Dialect.js"
import { Responder } from "../Responder.js"
import type { ChatCompletion, ChatCompletionChunk } from "./completion.js"
import * as Render from "./render.js"
import { decodeBody, requestLimits, toChatRequest } from "./request.js"
import type { ChatCompletionRequest } from "./wire.js"

// Every type of the typed API's signatures, by name, beside the service.
export * from "./completion.js"
export { ChatCompletionRequest } from "./wire.js"
export type { ChatRequest } from "../../chat/ChatRequest.js"
export type { RunOutcomeError } from "../../chat/errors.js"
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
     * run's failure, or its submission's, is the typed error. Interrupting it cancels the run.
     */
    readonly create: (request: ChatRequest) => Effect.Effect<ChatCompletion, SubmitError | RunOutcomeError>
    /**
     * The `chat.completion.chunk`s as the run produces them, starting with the role chunk (strict-buffered models:
     * once the run was collected and validated). A run that fails, before or after output, fails the stream with
     * its typed error. The run lives in the stream's scope: closing or interrupting the stream cancels it.
     */
    readonly stream: (request: ChatRequest) => Stream.Stream<ChatCompletionChunk, SubmitError | RunOutcomeError>
  }
}

/** Chat Completions for Effect callers: typed requests, completions and chunks, over the edge's one response path. */
export class ChatCompletions extends Context.Tag("@iop/edge/ChatCompletions")<
  ChatCompletions,
  ChatCompletions.Service
>() {}

export const make = Effect.gen(function* () {
  const responder = yield* Responder
  const config = yield* EdgeConfig
  const limits = requestLimits(config)

  const lookupModel = resolveModel(yield* NodeRegistry)
  // The run's lines (its summary is logged when its scope closes) at the config's `log.level`, restored after.
  const atLogLevel = Effect.locallyScoped(FiberRef.currentMinimumLogLevel, Logging.levels[config.log.level])

  const request: ChatCompletions.Service["request"] = (wire) =>
    Effect.flatMap(lookupModel(wire.model), (model) => toChatRequest(wire, model, limits))

  const create: ChatCompletions.Service["create"] = (request) =>
    atLogLevel.pipe(
      Effect.zipRight(responder.complete(request, (run, emissions) =>
        Render.completion(renderContext(request, request.submit.model, run), emissions))),
      Effect.scoped,
      Effect.withSpan("ChatCompletions.create")
    )

  const stream: ChatCompletions.Service["stream"] = (request) =>
    Stream.unwrapScoped(
      Effect.as(
        atLogLevel,
        responder.items(request, (run) => Render.chunkBuilder(renderContext(request, request.submit.model, run)))
      )
    ).pipe(Stream.withSpan("ChatCompletions.stream"))

  return { request, create, stream } satisfies ChatCompletions.Service
})

export const ChatCompletionsLive: Layer.Layer<ChatCompletions, never, Responder | EdgeConfig | NodeRegistry> = Layer.effect(
  ChatCompletions,
  make
)

/** `ChatCompletions.request` of the service in context. */
export const request = (wire: ChatCompletionRequest) => Effect.flatMap(ChatCompletions, (c) => c.request(wire))

/** `ChatCompletions.create` of the service in context. */
export const create = (request: ChatRequest) => Effect.flatMap(ChatCompletions, (c) => c.create(request))

/** `ChatCompletions.stream` of the service in context. */
export const stream = (request: ChatRequest) => Stream.unwrap(Effect.map(ChatCompletions, (c) => c.stream(request)))
