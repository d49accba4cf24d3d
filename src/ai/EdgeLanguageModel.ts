import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { ChatCompletions } from "../dialects/chat-completions/ChatCompletions.js"
import { fromEdgeError, malformedInput, malformedOutput, type Method } from "./aiError.js"
import { completionParts, streamEnd, streamStart, streamStep } from "./parts.js"
import { type Config, type Request, toWireRequest } from "./prompt.js"

export type { Config } from "./prompt.js"

/**
 * `@effect/ai`'s `LanguageModel` served by the edge in this process: each call is a Chat Completions request
 * prepared by `ChatCompletions.request` (the same checks, model resolution and limits as `POST
 * /v1/chat/completions`) and run by `create` (`generateText`: with the strict replays of a non-stream request) or
 * `stream` (`streamText`: interrupting the stream cancels the run). Tool calls are the edge's: parsed out of the
 * model's text or taken from the upstream's native calls, validated; `@effect/ai` runs their handlers.
 */
export const make = (model: string, config: Config = {}): Effect.Effect<LanguageModel.Service, never, ChatCompletions> =>
  Effect.gen(function* () {
    const chat = yield* ChatCompletions

    // The pure mappings answer an Either, which is an Effect: its Left is the failure.
    const prepare = (method: Method, request: Request) =>
      Effect.flatMap(
        Effect.mapError(toWireRequest(model, config, request), (reason) => malformedInput(method, reason)),
        (wire) => Effect.mapError(chat.request(wire), (e) => fromEdgeError(method, e))
      )

    return yield* LanguageModel.make({
      generateText: (options) =>
        prepare("generateText", options).pipe(
          Effect.flatMap((prepared) => Effect.mapError(chat.create(prepared), (e) => fromEdgeError("generateText", e))),
          Effect.flatMap((completion) =>
            Effect.mapError(completionParts(completion), (reason) => malformedOutput("generateText", reason))
          )
        ),
      streamText: (options) =>
        Stream.unwrap(Effect.map(prepare("streamText", options), (prepared) =>
          chat.stream(prepared).pipe(
            Stream.mapError((e) => fromEdgeError("streamText", e)),
            // The end as an element of its own, so that the fold closes the open block and gives the finish.
            Stream.map(Option.some),
            Stream.concat(Stream.succeed(Option.none())),
            Stream.mapAccumEffect(streamStart, (state, chunk) =>
              Option.match(chunk, {
                onNone: () => Effect.succeed([state, streamEnd(state)] as const),
                onSome: (chunk) =>
                  Effect.mapError(streamStep(state, chunk), (reason) => malformedOutput("streamText", reason))
              })),
            Stream.flattenIterables
          )))
    })
  })

/**
 * A `LanguageModel` answering with the edge's `model` (an id or an alias), with `config`'s fields on every
 * request (`temperature`, `max_tokens`, ...). It needs the edge's `ChatCompletions`: `Edge.layer(...)`,
 * `Edge.layerFrom(...)` or the test kit's `TestEdge.layer(...)`.
 */
export const layer = (model: string, config: Config = {}): Layer.Layer<LanguageModel.LanguageModel, never, ChatCompletions> =>
  Layer.effect(LanguageModel.LanguageModel, make(model, config))
