import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as NodeStream from "@effect/platform-node/NodeStream"
import type { ChatRequest } from "../../chat/ChatRequest.js"
import type { RunOutcomeError } from "../../chat/errors.js"
import type { SubmitError } from "../../run/errors.js"
import type { Dialect, RunInfo } from "../Dialect.js"
import { toHttpError } from "../../http/openaiError.js"
import { Responder } from "../Responder.js"
import * as Render from "./render.js"
import { decodeBody, toChatRequest } from "./request.js"
import type { ChatCompletionRequest } from "./wire.js"

/** What the Chat Completions renderers need of a request. */
const context = (request: ChatRequest, model: string, run: RunInfo): Render.ResponseContext => ({
  id: `chatcmpl-${run.runId.slice(4)}`,
  created: run.created,
  model,
  reasoningField: request.policy.reasoningField,
  includeUsage: request.includeUsage
})

/** OpenAI Chat Completions: `POST /v1/chat/completions`. */
export const dialect: Dialect<ChatCompletionRequest> = {
  api: "chat_completions",
  decode: decodeBody,
  model: (wire) => wire.model,
  toChatRequest,
  streamRenderer: (wire, request, run) => Render.chunkRenderer(context(request, wire.model, run)),
  body: (wire, request, run, emissions) => Render.completion(context(request, wire.model, run), emissions),
  error: toHttpError
}

export declare namespace ChatCompletions {
  export interface Service {
    /** The SSE body of a streamed request (see `Responder.stream`). The run lives in the caller's scope. */
    readonly stream: (
      request: ChatRequest
    ) => Effect.Effect<Stream.Stream<Uint8Array>, SubmitError | RunOutcomeError, Scope.Scope>
    /** Runs to the end (with strict retries) and returns the `chat.completion` body. */
    readonly complete: (request: ChatRequest) => Effect.Effect<unknown, SubmitError | RunOutcomeError, Scope.Scope>
  }
}

/** Chat Completions for callers that built a `ChatRequest` in code. */
export class ChatCompletions extends Context.Tag("@iop/edge/ChatCompletions")<
  ChatCompletions,
  ChatCompletions.Service
>() {}

export const make = Effect.map(Responder, (responder): ChatCompletions.Service => ({
  stream: (request) =>
    responder.stream(request, (run) => Render.chunkRenderer(context(request, request.submit.model, run))).pipe(
      // The body never fails (a defect ends it with its error event); a broken pipe here is a bug.
      Effect.map((body) => NodeStream.fromReadable(() => body, (e) => e).pipe(Stream.orDie))
    ),
  complete: (request) =>
    responder.complete(request, (run, emissions) =>
      Render.completion(context(request, request.submit.model, run), emissions))
}))

export const ChatCompletionsLive: Layer.Layer<ChatCompletions, never, Responder> = Layer.effect(ChatCompletions, make)
