import * as NodeStream from "@effect/platform-node/NodeStream"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { ChatRequest } from "../../src/chat/ChatRequest.js"
import { renderContext } from "../../src/dialects/chat-completions/dialect.js"
import * as Render from "../../src/dialects/chat-completions/render.js"
import { Responder } from "../../src/chat/Responder.js"

/**
 * The HTTP bodies of a Chat Completions request built in code, through the Responder as the route writes them
 * (the model named as `request.submit.model`): the SSE bytes of a streamed response (the run lives in the
 * caller's scope) and the non-stream JSON value.
 */

export const sseBody = (request: ChatRequest) =>
  Effect.flatMap(Responder, (responder) =>
    responder.stream(request, (run) => Render.chunkRenderer(renderContext(request, request.submit.model, run)))).pipe(
      // The body never fails (a defect ends it with its error event); a broken pipe here is a bug.
      Effect.map((body) => NodeStream.fromReadable(() => body, (e) => e).pipe(Stream.orDie))
    )

export const jsonBody = (request: ChatRequest) =>
  Effect.flatMap(Responder, (responder) =>
    responder.complete(request, (run, emissions) =>
      Render.completion(renderContext(request, request.submit.model, run), emissions)))
