import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeStream from "@effect/platform-node/NodeStream"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import type { Readable } from "node:stream"
import { nodeSource } from "./nodeSource.js"

/**
 * A streamed response with `body`. On the edge's Node server the `Readable` itself: the server pipes it into the
 * socket, with its backpressure, and the request's scope (the run's) stays open until it is written or the client
 * left. Behind `HttpApp.toWebHandler` a raw body is handed to the web `Response` and the request's scope closes as
 * the handler returns, which would cancel the run at once; only a Stream body keeps the scope open, until the
 * stream ends or the `Response` body is cancelled (which interrupts it and destroys the `Readable`).
 */
export const streamResponse = (
  body: Readable,
  options: HttpServerResponse.Options
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest> =>
  Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
    nodeSource(request) === undefined
      ? HttpServerResponse.stream(NodeStream.fromReadable(() => body, identity), options)
      : HttpServerResponse.raw(body, options))
