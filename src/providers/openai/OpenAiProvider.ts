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
 * sent with undici. The response body is read by callbacks: each read is
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

type Body = Undici.Dispatcher.ResponseData["body"]

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

const ignore = (): void => {}

/** How long the rest of a finished response may take to arrive before its connection is given up. */
const DRAIN_MS = 1_000

const STREAMING = { stream: true } as const

/**
 * One run's upstream request and body reader. Everything after the response
 * headers happens in the body's callbacks; `close` (the run scope's one
 * finalizer) aborts the request and stops listening.
 */
const makeRun = (
  sink: RunSink,
  initialState: Mapper.MapperState,
  secret: string | undefined,
  log: (message: string, detail: string) => void
) => {
  const controller = new AbortController()
  let state = initialState
  /** The run is over on our side: the terminal event was emitted or the scope closed. */
  let done = false
  let body: Body | undefined
  let status = 0
  let retryAfter: number | undefined
  let text: TextDecoder | undefined
  let sse: UpstreamDecoder | undefined
  let errorText = ""
  /** The response body was read to its end (its connection is free for the next request). */
  let ended = false

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
    else if (!ready && body !== undefined) {
      body.pause()
      sink.onReady(resume)
    }
  }

  const resume = (): void => {
    if (!done) body?.resume()
  }

  const finish = (): void => {
    if (done) return
    done = true
    detach(false)
    sink.end()
  }

  /**
   * Stops listening. A body that has not ended yet (the terminal event came
   * before the end of the response, as `[DONE]` does) is drained rather than
   * destroyed, so that its keep-alive connection goes back to the pool: a
   * destroyed body costs the next run a new connection. `abort` (the run was
   * cancelled) destroys it at once; a drain that takes too long does too.
   */
  const detach = (abort: boolean): void => {
    const b = body
    if (b === undefined) return
    body = undefined
    b.off("data", onData)
    b.off("end", onEnd)
    b.off("error", onError)
    b.off("data", onErrorData)
    b.off("end", onErrorEnd)
    b.off("error", onErrorEnd)
    if (ended) return
    // Undici errors a body destroyed before its end; `ignore` (attached first) hears it.
    if (abort) return void b.destroy()
    const timer = setTimeout(() => b.destroy(), DRAIN_MS)
    timer.unref()
    b.on("end", () => clearTimeout(timer))
    b.on("data", ignore)
    b.resume()
  }

  const onData = (bytes: Uint8Array): void => {
    if (sse !== undefined && text !== undefined) deliver(sse.feed(text.decode(bytes, STREAMING)))
  }

  const onEnd = (): void => {
    ended = true
    deliver([Mapper.END])
    finish()
  }

  const onError = (error: unknown): void => {
    deliver([transportFailed(`upstream stream broke: ${describeError(error)}`)])
    finish()
  }

  const onErrorData = (bytes: Uint8Array): void => {
    errorText += text?.decode(bytes, STREAMING) ?? ""
    if (errorText.length >= MAX_ERROR_BODY_CHARS) onErrorEnd()
  }

  // The end of an error answer's body, or as much of it as was read: its status, code, message and Retry-After.
  const onErrorEnd = (): void => {
    ended = errorText.length < MAX_ERROR_BODY_CHARS
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

  const onResponse = (response: Undici.Dispatcher.ResponseData): void => {
    if (done) {
      response.body.destroy()
      return
    }
    body = response.body
    status = response.statusCode
    text = new TextDecoder()
    if (status >= 200 && status < 300) {
      sse = makeUpstreamDecoder()
      body.on("data", onData)
      body.on("end", onEnd)
      body.on("error", onError)
    } else {
      retryAfter = retryAfterSeconds(response.headers["retry-after"], response.headers["retry-after-ms"])
      body.on("data", onErrorData)
      body.on("end", onErrorEnd)
      body.on("error", onErrorEnd)
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
    target.dispatcher.request(
      {
        origin: target.origin,
        path: target.path,
        method: "POST",
        headers: target.headers,
        body: requestBody,
        signal: controller.signal,
        headersTimeout: HEADERS_TIMEOUT_MS,
        bodyTimeout: 0
      },
      (error, response) => {
        if (error) {
          if (!retried && !done && isStaleConnection(error)) return connect(target, requestBody, true)
          if (done) return
          // The cause names the upstream's address: the log's, not the client's.
          log("upstream request failed", describeError(error))
          return failBeforeResponse("upstream unreachable")
        }
        // Heard before anything else: undici errors a body it destroys (abort, reset), and an unheard
        // 'error' would crash the process, even for a response that arrives after the run was closed.
        response.body.on("error", ignore)
        onResponse(response)
      }
    )
  }

  /** The run scope's finalizer: nothing reaches the sink after it; the sink is ended as `fromStream` does. */
  const close = (): void => {
    if (done) return
    done = true
    detach(true)
    controller.abort()
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
