import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { IncomingMessage } from "node:http"

/**
 * A response to a request whose body was not read to its end (refused before
 * or while reading it: 413, 401, 403, 503). Closing the socket while the
 * client still sends makes its kernel reset the connection, and a client that
 * reads only once it has written gets `EPIPE` instead of the answer (the reset
 * may even drop the answer it had received). So the answer says
 * `Connection: close`, its bytes are written, the rest of the body is read and
 * dropped (bounded in bytes and time), and only then does the response end and
 * Node close the connection.
 *
 * The answer is written first rather than after the discard: a client that
 * reads while it sends sees it at once and can stop sending; one that reads
 * only afterwards finds it waiting in its socket. Either way the connection is
 * never closed before the discard ended, which is what keeps the reset away.
 */

export type UnreadPlan =
  /** The body was read (or there is none): nothing to do. */
  | { readonly _tag: "Keep" }
  /** Answer with `Connection: close`, then discard at most `maxBytes` more before closing. */
  | { readonly _tag: "Discard"; readonly maxBytes: number }
  /** More is declared than would be discarded: answer with `Connection: close` and close at once. */
  | { readonly _tag: "Close" }

/**
 * How much of a refused body is read and dropped: 16× the limit, at least 64 MiB. Generous, so that realistic
 * oversize uploads (a 10 or 50 MB prompt, an inlined file) still get their 413 rather than a reset; reading and
 * dropping costs no memory, only the bytes' transfer, and `requestTimeoutMs` bounds it in time. A body declared
 * larger than this is answered and its connection closed without reading it.
 */
export const discardBudget = (limit: number): number => Math.max(16 * limit, 64 * 1024 * 1024)

export const planUnread = (request: {
  readonly headers: Readonly<Record<string, string | undefined>>
  /** Whether the whole body has been received. */
  readonly complete: boolean
  readonly maxBodyBytes: number
}): UnreadPlan => {
  if (request.complete) return { _tag: "Keep" }
  const length = request.headers["content-length"]
  const chunked = request.headers["transfer-encoding"] !== undefined
  const declared = length === undefined ? undefined : Number(length)
  if (!chunked && (declared === undefined || !(declared > 0))) return { _tag: "Keep" }
  const maxBytes = discardBudget(request.maxBodyBytes)
  return !chunked && declared !== undefined && declared > maxBytes ? { _tag: "Close" } : { _tag: "Discard", maxBytes }
}

/** Reads and drops the rest of a request body: until its end, `maxBytes` more bytes, or the socket closes. */
const discardRest = (source: IncomingMessage, maxBytes: number): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    let seen = 0
    const cleanup = () => {
      source.off("data", onData)
      source.off("end", done)
      source.off("close", done)
      source.off("error", done)
    }
    const done = () => {
      cleanup()
      resume(Effect.void)
    }
    const onData = (chunk: Buffer) => {
      seen += chunk.length
      if (seen > maxBytes) done()
    }
    if (source.complete || source.destroyed) return resume(Effect.void)
    source.on("data", onData)
    source.on("end", done)
    source.on("close", done)
    source.on("error", done)
    source.resume()
    return Effect.sync(cleanup)
  })

/** The response's bytes, when it is a buffered one (every error response is). */
const bufferedBody = (response: HttpServerResponse.HttpServerResponse) => {
  const body = response.body
  switch (body._tag) {
    case "Empty":
      return { bytes: new Uint8Array(0), contentType: undefined }
    case "Uint8Array":
      return { bytes: body.body, contentType: body.contentType }
    default:
      return undefined
  }
}

/**
 * Applies the plan to a response: `Connection: close`, and for `Discard` a
 * body that ends only once the rest of the request was dropped (at most
 * `timeout`; Node's own `requestTimeout` bounds it too).
 */
export const applyPlan = (
  response: HttpServerResponse.HttpServerResponse,
  plan: UnreadPlan,
  source: IncomingMessage,
  timeout: Duration.DurationInput
): HttpServerResponse.HttpServerResponse => {
  if (plan._tag === "Keep") return response
  const closing = HttpServerResponse.setHeader(response, "connection", "close")
  const buffered = bufferedBody(closing)
  if (plan._tag === "Close" || buffered === undefined) return closing
  const discard = discardRest(source, plan.maxBytes).pipe(Effect.timeoutOption(timeout))
  const body = Stream.make(buffered.bytes).pipe(Stream.concat(Stream.drain(Stream.fromEffect(discard))))
  return HttpServerResponse.stream(body, {
    status: closing.status,
    headers: closing.headers,
    contentLength: buffered.bytes.length,
    ...(buffered.contentType === undefined ? {} : { contentType: buffered.contentType })
  })
}
