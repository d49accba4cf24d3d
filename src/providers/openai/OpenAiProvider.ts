import { TextDecoder } from "node:util"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type * as Undici from "@effect/platform-node/Undici"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import * as RunEvent from "../../run/RunEvent.js"
import type { RunSink } from "../../run/RunSink.js"
import type { SubmitRunRequest } from "../../run/SubmitRunRequest.js"
import type { Provider } from "../Provider.js"
import * as Mapper from "./toRunEvents.js"
import { toUpstreamBody } from "./upstreamRequest.js"
import { makeUpstreamDecoder, type UpstreamDecoder } from "./upstreamSse.js"
import { clip, errorBodyCode, errorBodyMessage, retryAfterSeconds, scrubSecrets, upstreamText } from "./upstreamWire.js"
import { onCloseSync } from "../../common/onClose.js"

/**
 * A provider for any OpenAI-compatible upstream (llama.cpp, vLLM, Ollama,
 * LM Studio, OpenAI): one streamed `POST {baseUrl}/chat/completions` per run,
 * sent with undici's `dispatch` and read by its handler: each read is
 * decoded, folded through the pure mapper and handed to the run's sink in one
 * `emit`; no fiber remains while the body flows. Every failure (HTTP status,
 * transport, broken stream, upstream error event) becomes the run's one
 * `Failed` event; the sink ends right after the terminal event. Closing the
 * run's scope aborts the request and closes the socket.
 *
 * Upstream text in a `Failed` event is clipped (1 KiB) and scrubbed of the
 * edge's upstream key (and anything that looks like a bearer token or key);
 * a non-2xx answer's status, `code` and `Retry-After` go with it. A request
 * that got no answer says only "upstream unreachable": its cause (which names
 * the upstream's address) goes to the log.
 */

export interface Options {
  /** The upstream's base URL, ending in `/v1` for most servers. */
  readonly baseUrl: string
  readonly upstreamModel: string
  readonly apiKey: Redacted.Redacted<string> | undefined
  readonly toolMode: "native" | "text"
  readonly headers?: Readonly<Record<string, string>>
}

/** How much of an error answer's body is read for its message. */
const MAX_ERROR_BODY_CHARS = 16 * 1024

// Waiting for the first byte of an answer is bounded by the run plane's idle watchdog, not here (undici's own
// default would cut a queued request at 300 s); the body has no timeout of its own for the same reason.
const HEADERS_TIMEOUT_MS = 60 * 60 * 1000

interface Target {
  readonly dispatcher: Undici.Dispatcher
  readonly origin: string
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
}

export const make = (options: Options): Effect.Effect<Provider, never, NodeHttpClient.Dispatcher> =>
  Effect.map(NodeHttpClient.Dispatcher, (dispatcher): Provider => {
    const url = `${options.baseUrl.replace(/\/+$/, "")}/chat/completions`
    const parsed = URL.canParse(url) ? new URL(url) : undefined
    const target: Target | undefined = parsed === undefined ? undefined : {
      dispatcher,
      origin: parsed.origin,
      path: parsed.pathname + parsed.search,
      headers: requestHeaders(options)
    }
    const initialState = Mapper.initial({ toolMode: options.toolMode, upstreamModel: options.upstreamModel })
    const bodyOptions = { upstreamModel: options.upstreamModel, toolMode: options.toolMode } as const
    const secret = options.apiKey === undefined ? undefined : Redacted.value(options.apiKey)

    const start = (request: SubmitRunRequest, sink: RunSink): Effect.Effect<void, never, Scope.Scope> =>
      Effect.flatMap(Effect.runtime<never>(), (runtime) => {
        // A failure's detail that must not reach the client, logged from the callback that heard it.
        const log = (message: string, detail: string): void => {
          Runtime.runFork(runtime)(
            Effect.logWarning(message).pipe(Effect.annotateLogs({ error: upstreamText(detail, secret) }))
          )
        }
        if (target === undefined) {
          return Effect.sync(() => {
            log("upstream request failed", `invalid base URL ${url}`)
            makeRun(sink, initialState, secret, log).failBeforeResponse("upstream request failed: invalid base URL")
          })
        }
        const run = makeRun(sink, initialState, secret, log)
        const body = JSON.stringify(toUpstreamBody(request, bodyOptions))
        return onCloseSync(run.close).pipe(Effect.zipRight(Effect.sync(() => run.connect(target, body))))
      })

    return { start }
  })

const requestHeaders = (options: Options): Record<string, string> => {
  const headers: Record<string, string> = { accept: "text/event-stream" }
  for (const [name, value] of Object.entries(options.headers ?? {})) headers[name.toLowerCase()] = value
  headers["content-type"] = "application/json"
  if (options.apiKey !== undefined) headers["authorization"] = `Bearer ${Redacted.value(options.apiKey)}`
  return headers
}

/** How long the rest of a finished response may take to arrive before its connection is given up. */
const DRAIN_MS = 1_000

const STREAMING = { stream: true } as const

/** The reason undici is given when a run is closed before its response ended. */
const closedByRun = (): Error => new Error("run closed")

/**
 * One run's upstream request, read with undici's dispatch handler: the
 * response's bytes arrive in `onResponseData` straight from the socket's
 * parser (no body stream, no AbortController per request); backpressure is the
 * handler's `pause` / `resume`. `close` (the run scope's one finalizer) aborts
 * the request.
 */
const makeRun = (
  sink: RunSink,
  initialState: Mapper.MapperState,
  secret: string | undefined,
  log: (message: string, detail: string) => void
) => {
  let state = initialState
  /** The run is over on our side: the terminal event was emitted or the scope closed. */
  let done = false
  let controller: Undici.Dispatcher.DispatchController | undefined
  /** What the response's bytes are: the event stream, an error answer's body, or past the run's end. */
  let reading: "stream" | "error" | "ignored" = "ignored"
  let status = 0
  let retryAfter: number | undefined
  let text: TextDecoder | undefined
  let sse: UpstreamDecoder | undefined
  let errorText = ""
  /** The response was read to its end (its connection is free for the next request). */
  let ended = false
  let drainTimer: ReturnType<typeof setTimeout> | undefined

  // Folds inputs through the mapper; at most one `emit` for all the events that came out.
  const deliver = (inputs: ReadonlyArray<Mapper.StreamInput>): void => {
    if (done) return
    // The mapper answers fresh arrays: the first one is passed on as it is, more are joined into one.
    let events: ReadonlyArray<RunEvent.RunEvent> | undefined
    let joined: Array<RunEvent.RunEvent> | undefined
    for (const input of inputs) {
      const [next, fed] = Mapper.feed(state, input)
      state = next
      const out = state.closed ? scrubbed(fed) : fed
      if (out.length > 0) {
        if (events === undefined) events = out
        else {
          if (joined === undefined) events = joined = [...events]
          for (const event of out) joined.push(event)
        }
      }
      if (state.closed) break
    }
    const ready = events === undefined || sink.emit(events)
    if (state.closed) finish()
    else if (!ready && controller !== undefined) {
      controller.pause()
      sink.onReady(resume)
    }
  }

  const resume = (): void => {
    if (!done) controller?.resume()
  }

  const finish = (): void => {
    if (done) return
    done = true
    stopReading(false)
    sink.end()
  }

  /**
   * Stops reading. A response that has not ended yet (the terminal event came
   * before its end, as `[DONE]` does) is read on to its end and dropped, so
   * that its keep-alive connection goes back to the pool: an aborted request
   * costs the next run a new connection. `abort` (the run was cancelled) aborts
   * at once; so does a drain that takes too long.
   */
  const stopReading = (abort: boolean): void => {
    reading = "ignored"
    if (ended) return
    if (abort || controller === undefined) return void controller?.abort(closedByRun())
    const c = controller
    drainTimer = setTimeout(() => c.abort(closedByRun()), DRAIN_MS)
    drainTimer.unref()
    c.resume()
  }

  const onData = (bytes: Uint8Array): void => {
    switch (reading) {
      case "stream":
        if (sse !== undefined && text !== undefined) deliver(sse.feed(text.decode(bytes, STREAMING)))
        return
      case "error":
        errorText += text?.decode(bytes, STREAMING) ?? ""
        if (errorText.length >= MAX_ERROR_BODY_CHARS) onErrorEnd()
        return
      case "ignored":
        return
    }
  }

  const onEnd = (): void => {
    ended = true
    if (drainTimer !== undefined) clearTimeout(drainTimer)
    switch (reading) {
      case "stream":
        deliver([Mapper.END])
        return finish()
      case "error":
        return onErrorEnd()
      case "ignored":
        return
    }
  }

  const onBroken = (error: unknown): void => {
    // Errored is over too: nothing is left to drain.
    ended = true
    if (drainTimer !== undefined) clearTimeout(drainTimer)
    switch (reading) {
      case "stream":
        deliver([transportFailed(`upstream stream broke: ${describeError(error)}`)])
        return finish()
      case "error":
        return onErrorEnd()
      case "ignored":
        return
    }
  }

  // The end of an error answer's body, or as much of it as was read: its status, code, message and Retry-After.
  const onErrorEnd = (): void => {
    // Scrubbed before anything is cut from it, so that no part of a key survives the cut.
    const bodyText = scrubSecrets(errorText, secret)
    const message = upstreamText(errorBodyMessage(bodyText), secret)
    const code = errorBodyCode(bodyText)
    const upstream: RunEvent.UpstreamAnswer = {
      status,
      message,
      ...(code !== undefined ? { code } : {}),
      ...(retryAfter !== undefined ? { retryAfter } : {})
    }
    deliver([transportFailed(`upstream answered HTTP ${status}: ${message}`, upstream)])
    finish()
  }

  const onResponse = (statusCode: number, headers: Record<string, string | Array<string> | undefined>): void => {
    if (done) return
    status = statusCode
    text = new TextDecoder()
    if (status >= 200 && status < 300) {
      sse = makeUpstreamDecoder()
      reading = "stream"
      sink.accept()
    } else {
      retryAfter = retryAfterSeconds(headers["retry-after"], headers["retry-after-ms"])
      reading = "error"
    }
  }

  const failBeforeResponse = (message: string): void => deliver([transportFailed(message)])

  /**
   * Sends the request; everything after it happens in undici's callbacks, so
   * a run has no fiber of its own. An upstream may close an idle keep-alive
   * connection just as it is reused: no byte of an answer came back, so the
   * request is sent once more on a fresh connection.
   */
  const connect = (target: Target, requestBody: string, retried = false): void => {
    if (done) return
    let answered = false
    target.dispatcher.dispatch(
      {
        origin: target.origin,
        path: target.path,
        method: "POST",
        headers: target.headers,
        body: requestBody,
        headersTimeout: HEADERS_TIMEOUT_MS,
        bodyTimeout: 0
      },
      {
        onRequestStart: (c) => {
          controller = c
          // Closed while the request waited for a connection: it is not sent.
          if (done) c.abort(closedByRun())
        },
        onResponseStart: (_c, statusCode, headers) => {
          answered = true
          onResponse(statusCode, headers)
        },
        onResponseData: (_c, chunk) => onData(chunk),
        onResponseEnd: () => onEnd(),
        onResponseError: (_c, error) => {
          if (answered) return onBroken(error)
          if (done) return
          if (!retried && isStaleConnection(error)) return connect(target, requestBody, true)
          // Unanswered and not retried: the request is over, nothing of it is left to drain.
          ended = true
          // The cause names the upstream's address: the log's, not the client's.
          log("upstream request failed", describeError(error))
          failBeforeResponse("upstream unreachable")
        }
      }
    )
  }

  /** The run scope's finalizer: nothing reaches the sink after it; the sink is ended as `fromStream` does. */
  const close = (): void => {
    if (done) return
    done = true
    stopReading(true)
    sink.end()
  }

  /** The terminal `Failed` of a batch, its upstream text scrubbed and clipped (the mapper quotes upstream text). */
  const scrubbed = (events: ReadonlyArray<RunEvent.RunEvent>): ReadonlyArray<RunEvent.RunEvent> => {
    const last = events[events.length - 1]
    if (last === undefined || last._tag !== "Failed") return events
    const message = upstreamText(last.message, secret)
    return message === last.message ? events : [...events.slice(0, -1), RunEvent.failed(message, last.upstream)]
  }

  return { connect, close, failBeforeResponse }
}

const transportFailed = (message: string, upstream?: RunEvent.UpstreamAnswer): Mapper.StreamInput =>
  upstream === undefined ? { _tag: "TransportFailed", message } : { _tag: "TransportFailed", message, upstream }

/** A transport failure before any response: the pooled socket was closed by the other side. */
const isStaleConnection = (error: unknown): boolean =>
  /other side closed|ECONNRESET|socket hang up|UND_ERR_SOCKET/i.test(causeText(error) ?? "")

const causeText = (cause: unknown, depth = 0): string | undefined => {
  if (depth > 3 || cause === undefined || cause === null) return undefined
  if (!(cause instanceof Error)) return clip(String(cause), 300)
  const code = Predicate.hasProperty(cause, "code") && typeof cause.code === "string" ? cause.code : undefined
  const own = code !== undefined && !cause.message.includes(code) ? `${cause.message} (${code})` : cause.message
  // fetch-style errors ("fetch failed") keep the useful part in `cause`.
  const inner = causeText(cause.cause, depth + 1)
  return inner !== undefined && inner !== own ? `${own}: ${inner}` : own
}

const describeError = (error: unknown): string => causeText(error) ?? "unknown error"
