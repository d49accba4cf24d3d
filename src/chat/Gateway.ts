import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { Readable } from "node:stream"
import { EdgeConfig } from "../config/EdgeConfig.js"
import * as Logging from "../observability/Logging.js"
import type { NoNodeForModel, SubmitError } from "../protocol/errors.js"
import type { ModelOptions } from "../protocol/ModelOptions.js"
import { NodeRegistry } from "../run/NodeRegistry.js"
import type { ChatRequest } from "./ChatRequest.js"
import { type ChatRequestLimits, requestLimitsOf } from "./buildChatRequest.js"
import type { RateLimited } from "./EdgeError.js"
import { ModelNotFound, type RunOutcomeError } from "./errors.js"
import { allows, type KeyPolicy } from "./KeyPolicy.js"
import { Limits } from "./Limits.js"
import type { Emission } from "./session.js"
import type { ItemRenderer, Rendered, RunInfo, StreamRenderer } from "./Rendering.js"
import { Responder } from "./Responder.js"
import { resolveModel } from "./resolveModel.js"

/** Why an admitted request's response failed: the limits, its submission, or its run. */
export type ResponseError = RateLimited | SubmitError | RunOutcomeError

export declare namespace Gateway {
  export interface Service {
    /** What a dialect's translation may let through (the largest tool schema). */
    readonly requestLimits: ChatRequestLimits
    /**
     * The model a caller's name (an id or an alias) names, for a caller holding `key` (absent: no key policy). A
     * model the key may not use does not exist for it (`ModelNotFound`); a known model no live node serves now
     * is an outage (`NoNodeForModel`).
     */
    readonly model: (name: string, key?: KeyPolicy) => Effect.Effect<ModelOptions, ModelNotFound | NoNodeForModel>
    /** A streamed response's body (`Responder.stream`), once the request was admitted. */
    readonly stream: (
      request: ChatRequest,
      render: (run: RunInfo) => StreamRenderer,
      key?: KeyPolicy
    ) => Effect.Effect<Readable, ResponseError, Scope.Scope>
    /** A streamed response as typed items (`Responder.items`), once the request was admitted. */
    readonly items: <A>(
      request: ChatRequest,
      render: (run: RunInfo) => ItemRenderer<A>,
      key?: KeyPolicy
    ) => Stream.Stream<A, ResponseError>
    /** A run to its end, rendered (`Responder.complete`), once the request was admitted. */
    readonly complete: <B>(
      request: ChatRequest,
      render: (run: RunInfo, emissions: ReadonlyArray<Emission>) => Rendered<B>,
      key?: KeyPolicy
    ) => Effect.Effect<B, ResponseError, Scope.Scope>
  }
}

/**
 * The one door every caller goes through, the HTTP routes and the typed API alike: model resolution and the
 * key's permissions, request limits, concurrency limits (the edge's and the key's), the log level, and the call
 * into the response path. Transport (bodies, sockets, headers) stays with the caller.
 */
export class Gateway extends Context.Tag("@iop/edge/Gateway")<Gateway, Gateway.Service>() {}

export const make: Effect.Effect<Gateway.Service, never, EdgeConfig | NodeRegistry | Limits | Responder> = Effect.gen(
  function* () {
    const config = yield* EdgeConfig
    const limits = yield* Limits
    const responder = yield* Responder
    const resolve = resolveModel(yield* NodeRegistry)
    const level = Logging.levels[config.log.level]

    const model = (name: string, key?: KeyPolicy) =>
      Effect.flatMap(resolve(name), (found) =>
        allows(key, found.id, name) ? Effect.succeed(found) : Effect.fail(new ModelNotFound({ model: name })))

    // The caller's scope runs at the config's level (restored after it): a host app's own logging is not
    // changed, and nothing is set when the caller already runs at it (the edge's own server does).
    const atLogLevel: Effect.Effect<void, never, Scope.Scope> = Effect.flatMap(
      FiberRef.get(FiberRef.currentMinimumLogLevel),
      (current: LogLevel.LogLevel) =>
        current === level ? Effect.void : Effect.locallyScoped(FiberRef.currentMinimumLogLevel, level)
    )

    /** The request's admission, for the caller's scope: its log level and its concurrency slots. */
    const admit = (key: KeyPolicy | undefined) => Effect.zipRight(atLogLevel, limits.acquire(key))

    // Reasoning continuity keeps each caller's reasoning apart: the request says whose it is.
    const owned = (request: ChatRequest, key: KeyPolicy | undefined): ChatRequest =>
      key !== undefined && request.model.reasoning.continuity ? { ...request, caller: key.id } : request

    return {
      requestLimits: requestLimitsOf(config.runs),
      model,
      stream: (request, render, key) => Effect.zipRight(admit(key), responder.stream(owned(request, key), render)),
      items: (request, render, key) =>
        Stream.unwrapScoped(Effect.as(admit(key), responder.items(owned(request, key), render))),
      complete: (request, render, key) => Effect.zipRight(admit(key), responder.complete(owned(request, key), render))
    } satisfies Gateway.Service
  }
)

export const layer: Layer.Layer<Gateway, never, EdgeConfig | NodeRegistry | Limits | Responder> = Layer.effect(
  Gateway,
  make
)
