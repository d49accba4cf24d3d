/** The typed Chat Completions API's service, over the edge's one door (`Gateway`). */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { Gateway } from "../../chat/Gateway.js"
import { withinDepth } from "../jsonBody.js"
import { ChatCompletions } from "./ChatCompletions.js"
import { renderContext } from "./dialect.js"
import { chatRequestOf, prepared } from "./prepared.js"
import * as Render from "./render.js"
import { decodeWire, toChatRequest } from "./request.js"

export const make = Effect.gen(function* () {
  const gateway = yield* Gateway

  // A request built in code is held to the body's checks: its depth limit first (nothing below recurses over a
  // deeper one), then the same decode as the body's (ranges, lengths), so the typed API rejects what POST rejects.
  const request: ChatCompletions.Service["request"] = (wire) =>
    Effect.flatMap(Effect.flatMap(withinDepth(wire), decodeWire), (checked) =>
      Effect.flatMap(gateway.model(checked.model), (model) =>
        Effect.map(toChatRequest(checked, model, gateway.requestLimits), prepared)))

  // Through the same door as the HTTP routes: the edge's concurrency limit and the config's log level apply.
  const create: ChatCompletions.Service["create"] = (handle) => {
    const request = chatRequestOf(handle)
    return gateway.complete(request, (run, emissions) =>
      Render.completion(renderContext(request, request.submit.model, run), emissions)).pipe(
        Effect.scoped,
        Effect.withSpan("ChatCompletions.create")
      )
  }

  const stream: ChatCompletions.Service["stream"] = (handle) => {
    const request = chatRequestOf(handle)
    return gateway.items(request, (run) => Render.chunkBuilder(renderContext(request, request.submit.model, run))).pipe(
      Stream.withSpan("ChatCompletions.stream")
    )
  }

  return { request, create, stream } satisfies ChatCompletions.Service
})

export const layer: Layer.Layer<ChatCompletions, never, Gateway> = Layer.effect(ChatCompletions, make)

