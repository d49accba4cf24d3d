import * as Cookies from "@effect/platform/Cookies"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as NodeStream from "@effect/platform-node/NodeStream"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import type { Readable } from "node:stream"
import { ABANDONED } from "../chat/SessionBody.js"
import { nodeSource } from "./nodeSource.js"

/**
 * A streamed response with `body`. On the edge's Node server the `Readable` itself, piped into the socket with
 * its backpressure, and the request's scope (the run's) stays open until it is written or the client left.
 * Behind `HttpApp.toWebHandler` a raw body is handed to the web `Response` and the request's scope closes as
 * the handler returns, which would cancel the run at once; only a Stream body keeps the scope open, until the
 * stream ends or the `Response` body is cancelled (which interrupts it and destroys the `Readable`).
 */
export const streamResponse = (
  body: Readable,
  options: HttpServerResponse.Options
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    if (nodeSource(request) === undefined) {
      return Effect.succeed(HttpServerResponse.stream(NodeStream.fromReadable(() => body, identity), options))
    }
    const response = HttpServerResponse.raw(body, options)
    return Effect.as(HttpApp.appendPreResponseHandler(writeDirectly(body)), response)
  })

/**
 * Writes the response whose body is `body` itself, as the last step before the server would: after every
 * middleware (the final status and headers), with `Readable.pipe`. The platform writes a raw body with
 * `stream.pipeline` and an abort signal, whose AbortControllers and the `AbortError` built as every pipeline
 * finishes cost about a fifth of a short stream's CPU. The handler returns once the response ended (or the
 * client left: it is ended then too), so the server finds it written and leaves it. A response something
 * changed on the way (another body, cookies to set) is left to the server.
 */
const writeDirectly = (body: Readable): HttpApp.PreResponseHandler => (request, response) => {
  if (response.body._tag !== "Raw" || response.body.body !== body || !Cookies.isEmpty(response.cookies)) {
    return Effect.succeed(response)
  }
  const res = NodeHttpServerRequest.toServerResponse(request)
  if (res.headersSent || res.writableEnded) return Effect.succeed(response)
  return Effect.async<HttpServerResponse.HttpServerResponse>((resume) => {
    const finished = (): void => {
      cleanup()
      // A client that left: ended too, so that nothing after this writes to it.
      if (!res.writableEnded) res.end()
      // The response is written: what follows (the run's finalizers, its summary, the access log) waits for the
      // I/O that is ready to be handled first, so that streams ending together do not hold up the next
      // requests' first tokens.
      setImmediate(() => resume(Effect.succeed(response)))
    }
    const broken = (): void => {
      cleanup()
      body.unpipe(res)
      res.destroy()
      if (!res.writableEnded) res.end()
      resume(Effect.succeed(response))
    }
    // The run ended while the client read nothing (its write stall): the socket gets what it takes now, the
    // terminal event included if it fits, and the connection closes; nothing waits for that client any longer.
    const abandoned = (): void => {
      body.unpipe(res)
      for (let chunk: unknown = body.read(); chunk !== null; chunk = body.read()) res.write(chunk)
      res.end()
      setImmediate(() => {
        if (!res.writableFinished) res.destroy()
      })
    }
    const cleanup = (): void => {
      res.off("finish", finished)
      res.off("close", finished)
      body.off("error", broken)
      body.off(ABANDONED, abandoned)
    }
    res.once("finish", finished)
    res.once("close", finished)
    body.once("error", broken)
    body.once(ABANDONED, abandoned)
    res.writeHead(response.status, response.headers)
    body.pipe(res)
    // Interrupted (the client left, as the server saw first): the body is dropped, the response ended.
    return Effect.sync(() => {
      cleanup()
      body.unpipe(res)
      body.destroy()
      if (!res.writableEnded) res.end()
    })
  }).pipe(Effect.interruptible)
}
