import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { IncomingMessage } from "node:http"
import { BodyTooLarge, InvalidRequest } from "../chat/EdgeError.js"
import { nodeSource } from "./nodeSource.js"

/** A Node request's body, from its events: the edge's own server. */
const readNode = (source: IncomingMessage, limit: number) =>
  Effect.async<string, BodyTooLarge | InvalidRequest>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        cleanup()
        resume(Effect.fail(new BodyTooLarge({ limit })))
      } else chunks.push(chunk)
    }
    const onEnd = () => {
      cleanup()
      resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")))
    }
    const onError = (e: Error) => {
      cleanup()
      resume(Effect.fail(new InvalidRequest({ message: `could not read the request body: ${e.message}`, param: null })))
    }
    const cleanup = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
    }
    source.on("data", onData)
    source.on("end", onEnd)
    source.on("error", onError)
    return Effect.sync(cleanup)
  })

/**
 * Any other request's body (a web `Request` behind `HttpApp.toWebHandler`), from the platform's body stream. A
 * stream that passes the limit fails at once, which cancels its reader; `ignoreBOM` keeps a BOM as the Node path
 * does (a JSON body with one is invalid either way).
 */
const readStream = (request: HttpServerRequest.HttpServerRequest, limit: number) =>
  Effect.suspend(() => {
    // The platform's web request has no stream for an absent body: an empty one, as Node reads it.
    if (request.source instanceof Request && request.source.body === null) return Effect.succeed("")
    const decoder = new TextDecoder("utf-8", { ignoreBOM: true })
    let text = ""
    let size = 0
    return request.stream.pipe(
      Stream.mapError((e) => {
        const message = e.cause instanceof Error ? e.cause.message : e.message
        return new InvalidRequest({ message: `could not read the request body: ${message}`, param: null })
      }),
      Stream.runForEachChunk((chunk) => {
        for (const bytes of chunk) {
          size += bytes.length
          if (size > limit) return Effect.fail(new BodyTooLarge({ limit }))
          text += decoder.decode(bytes, { stream: true })
        }
        return Effect.void
      }),
      Effect.map(() => text + decoder.decode())
    )
  })

/**
 * The request body as text, at most `limit` bytes. A declared length over the
 * limit fails before reading, a chunked body as soon as it passes the limit:
 * on the edge's Node server the edge middleware (`unreadBody.ts`) then answers
 * with `Connection: close` and reads and drops the rest, bounded, before the
 * connection closes.
 */
export const readBody = (limit: number) =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const declared = Number(request.headers["content-length"] ?? "0")
    if (declared > limit) return yield* Effect.fail(new BodyTooLarge({ limit }))
    const source = nodeSource(request)
    return yield* (source === undefined ? readStream(request, limit) : readNode(source, limit))
  })
