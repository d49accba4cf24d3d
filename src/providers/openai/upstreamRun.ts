import { TextDecoder } from "node:util"
import type * as Undici from "@effect/platform-node/Undici"
import * as Predicate from "effect/Predicate"
import { clip } from "../../common/clip.js"
import * as RunEvent from "../../protocol/RunEvent.js"
import type { RunSink } from "../../protocol/RunSink.js"
import { fromCompletion } from "./fromCompletion.js"
import * as Mapper from "./toRunEvents.js"
import { DEFAULT_MAX_EVENT_CHARS, makeUpstreamDecoder, type UpstreamDecoder } from "./upstreamSse.js"
import { errorBodyCode, errorBodyMessage, retryAfterSeconds, scrubSecrets, upstreamText } from "./upstreamWire.js"

/** Where a provider's requests go: one per configured model. */
export interface Target {
  readonly dispatcher: Undici.Dispatcher
  readonly origin: string
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  /** The same, asking for a whole answer (`accept: application/json`). */
  readonly wholeHeaders: Readonly<Record<string, string>>
}

/** How much of an error answer's body is read for its message. */
const MAX_ERROR_BODY_CHARS = 16 * 1024

// Waiting for the first byte of an answer is bounded by the run plane's idle watchdog, not here (undici's own
// default would cut a queued request at 300 s); the body has no timeout of its own for the same reason.
const HEADERS_TIMEOUT_MS = 60 * 60 * 1000

/** How long, and how many bytes of, the rest of a finished response are read before its connection is given up. */
const DRAIN_MS = 1_000
const DRAIN_BYTES = 64 * 1024

const STREAMING = { stream: true } as const

/**
 * Where one run's upstream request is; one variable holds it and each of the
 * dispatch handler's callbacks is a switch on it. The request's controller and
 * the run's sink stay outside: every state but `closed` may still need them.
 */
type RunState = Connecting | Streaming | WholeBody | ErrorBody | Draining | Closed

/** Sent, no answer yet. `retried`: this is the one resend after a stale keep-alive connection. */
interface Connecting {
  readonly _tag: "connecting"
  readonly retried: boolean
}

/** A 2xx answer: each read is decoded, parsed as SSE, mapped and emitted. `mapper` moves on in place (no copy per read). */
interface Streaming {
  readonly _tag: "streaming"
  readonly text: TextDecoder
  readonly sse: UpstreamDecoder
  mapper: Mapper.MapperState
}

/** A 2xx whole answer (asked for with `stream: false`): its body is read to its end, then mapped at once. */
interface WholeBody {
  readonly _tag: "wholeBody"
  readonly text: TextDecoder
  body: string
}

/** A non-2xx answer: its body is read, up to `MAX_ERROR_BODY_CHARS`, for the run's `Failed` event. */
interface ErrorBody {
  readonly _tag: "errorBody"
  readonly status: number
  readonly retryAfter: number | undefined
  readonly text: TextDecoder
  body: string
}

/**
 * After a clean terminal (`Complete`) that came before the body's end (as `[DONE]` does): the rest is read and
 * dropped, so that the keep-alive connection goes back to the pool (an aborted request costs the next run a new
 * connection), up to `DRAIN_BYTES` and `DRAIN_MS`; past either, the request is aborted.
 */
interface Draining {
  readonly _tag: "draining"
  bytesLeft: number
  readonly timer: ReturnType<typeof setTimeout>
}

/** Nothing more is read: the response ended, failed or was aborted, or the run's scope closed. */
interface Closed {
  readonly _tag: "closed"
}

const CONNECTING: Connecting = { _tag: "connecting", retried: false }
const RETRYING: Connecting = { _tag: "connecting", retried: true }
const CLOSED: Closed = { _tag: "closed" }

/** undici's abort reasons: the run was closed before its response ended; a read failed; a drain went over a bound. */
const closedByRun = (): Error => new Error("run closed")
const readFailed = (): Error => new Error("upstream read failed")
const drainOver = (): Error => new Error("drain over its bound")

/**
 * One run's upstream request, read with undici's dispatch handler (this object
 * is the handler): the response's bytes arrive in `onResponseData` straight
 * from the socket's parser (no body stream, no AbortController per request);
 * backpressure is the controller's `pause` / `resume`. A failed read (an
 * oversized or malformed event, an upstream error event, an error answer's
 * bounded body) aborts the request at once; only a clean end drains. `close`
 * (the run scope's one finalizer) aborts whatever is still being read.
 */
export class UpstreamRun implements Undici.Dispatcher.DispatchHandler {
  private state: RunState = CONNECTING
  private controller: Undici.Dispatcher.DispatchController | undefined = undefined
  private dispatcher: Undici.Dispatcher | undefined = undefined
  private request: Undici.Dispatcher.DispatchOptions | undefined = undefined
  /** The request asked for a whole answer (JSON), not a stream. */
  private whole = false

  constructor(
    private readonly sink: RunSink,
    private readonly initialMapper: Mapper.MapperState,
    private readonly secret: string | undefined,
    /** A failure's detail that must not reach the client, logged from the callback that heard it. */
    private readonly log: (message: string, detail: string) => void,
    /** Every answer's `Server` header, as it arrives (what the upstream says it is). */
    private readonly heard?: (server: string | ReadonlyArray<string> | undefined) => void
  ) {}

  /**
   * Sends the request; everything after it happens in undici's callbacks, so a run has no fiber of its own.
   * `traceparent`: the trace the request belongs to (the edge's, when it traces), for the upstream to continue.
   */
  connect(target: Target, body: string, whole: boolean, traceparent?: string): void {
    if (this.state._tag !== "connecting") return
    this.whole = whole
    this.dispatcher = target.dispatcher
    // Nothing comes back before the whole answer's end: the run's idle bound cannot see it computing.
    if (whole) this.sink.awaitWhole?.(true)
    const headers = whole ? target.wholeHeaders : target.headers
    this.request = {
      origin: target.origin,
      path: target.path,
      method: "POST",
      headers: traceparent === undefined ? headers : { ...headers, traceparent },
      body,
      headersTimeout: HEADERS_TIMEOUT_MS,
      bodyTimeout: 0
    }
    target.dispatcher.dispatch(this.request, this)
  }

  /** The run scope's finalizer: aborts what is still being read and ends the sink, unless the run ended already. */
  readonly close = (): void => {
    switch (this.state._tag) {
      case "connecting":
      case "streaming":
      case "wholeBody":
      case "errorBody":
        this.state = CLOSED
        // Before the request was sent there is no controller yet: `onRequestStart` aborts it.
        this.controller?.abort(closedByRun())
        return this.sink.end()
      case "draining":
      case "closed":
        // The sink was ended at the terminal; a drain is bounded on its own.
        return
    }
  }

  /** Fails the run before any answer (an invalid base URL, an unreachable upstream): the node's fault. */
  failBeforeResponse(message: string): void {
    if (this.state._tag !== "connecting") return
    this.state = CLOSED
    this.sink.emit([RunEvent.transportFailed(upstreamText(message, this.secret), "unreachable")])
    this.sink.end()
  }

  onRequestStart(controller: Undici.Dispatcher.DispatchController): void {
    this.controller = controller
    // Closed while the request waited for a connection: it is not sent.
    if (this.state._tag === "closed") controller.abort(closedByRun())
  }

  onResponseStart(
    _controller: Undici.Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | Array<string> | undefined>
  ): void {
    if (this.state._tag !== "connecting") return
    this.heard?.(headers["server"])
    if (statusCode >= 200 && statusCode < 300) {
      // An upstream that streams anyway (it ignored `stream: false`) is read as the stream it is, idle bound and all.
      const whole = this.whole && !isEventStream(headers["content-type"])
      if (this.whole && !whole) this.sink.awaitWhole?.(false)
      this.state = whole
        ? { _tag: "wholeBody", text: new TextDecoder(), body: "" }
        : { _tag: "streaming", text: new TextDecoder(), sse: makeUpstreamDecoder(), mapper: this.initialMapper }
      this.sink.accept()
    } else {
      const retryAfter = retryAfterSeconds(headers["retry-after"], headers["retry-after-ms"])
      this.state = { _tag: "errorBody", status: statusCode, retryAfter, text: new TextDecoder(), body: "" }
    }
  }

  onResponseData(_controller: Undici.Dispatcher.DispatchController, bytes: Uint8Array): void {
    const s = this.state
    switch (s._tag) {
      case "streaming":
        return this.deliver(s, s.sse.feed(s.text.decode(bytes, STREAMING)), false)
      case "wholeBody":
        s.body += s.text.decode(bytes, STREAMING)
        if (s.body.length > DEFAULT_MAX_EVENT_CHARS) {
          this.wholeAnswered([this.failed(`upstream sent an answer longer than ${DEFAULT_MAX_EVENT_CHARS} characters`)])
          this.controller?.abort(readFailed())
        }
        return
      case "errorBody":
        s.body += s.text.decode(bytes, STREAMING)
        if (s.body.length >= MAX_ERROR_BODY_CHARS) this.errorAnswered(s, false)
        return
      case "draining":
        s.bytesLeft -= bytes.length
        if (s.bytesLeft < 0) this.stopDraining(s, true)
        return
      case "connecting":
      case "closed":
        return
    }
  }

  onResponseEnd(): void {
    const s = this.state
    switch (s._tag) {
      case "streaming":
        return this.deliver(s, [Mapper.END], true)
      case "wholeBody":
        return this.wholeAnswered(this.scrubbedAll(fromCompletion(this.initialMapper, s.body + s.text.decode())))
      case "errorBody":
        return this.errorAnswered(s, true)
      case "draining":
        // Read to its end: the connection is free for the next request.
        return this.stopDraining(s, false)
      case "connecting":
      case "closed":
        return
    }
  }

  onResponseError(_controller: Undici.Dispatcher.DispatchController, error: Error): void {
    const s = this.state
    switch (s._tag) {
      case "connecting":
        return this.unanswered(s, error)
      case "streaming":
        return this.deliver(s, [transportFailed(`upstream stream broke: ${describeError(error)}`)], true)
      case "wholeBody":
        return this.wholeAnswered([
          RunEvent.transportFailed(upstreamText(`upstream answer broke: ${describeError(error)}`, this.secret), "broken")
        ])
      case "errorBody":
        // As much of the error answer as was read.
        return this.errorAnswered(s, true)
      case "draining":
        return this.stopDraining(s, false)
      case "closed":
        // Our own abort, or the request failed after the run ended.
        return
    }
  }

  /**
   * Folds one read's inputs through the mapper and emits what came out in at
   * most one batch. At a terminal the run leaves `streaming` before the batch
   * goes out: whatever re-enters then (the abort's `onResponseError`, the
   * scope's `close`) finds the run over. `over`: the response ended or broke.
   */
  private deliver(s: Streaming, inputs: ReadonlyArray<Mapper.StreamInput>, over: boolean): void {
    // The mapper answers fresh arrays: the first one is passed on as it is, more are joined into one.
    let events: ReadonlyArray<RunEvent.RunEvent> | undefined
    let joined: Array<RunEvent.RunEvent> | undefined
    let terminal: RunEvent.RunEvent | undefined
    let mapper = s.mapper
    const calls = mapper.calls
    for (const input of inputs) {
      const [next, fed] = Mapper.feed(mapper, input)
      mapper = next
      const last = fed[fed.length - 1]
      if (last !== undefined && RunEvent.isTerminal(last)) terminal = last
      const out = terminal?._tag === "Failed" ? this.scrubbed(fed, terminal) : fed
      if (out.length > 0) {
        if (events === undefined) events = out
        else {
          if (joined === undefined) events = joined = [...events]
          for (const event of out) joined.push(event)
        }
      }
      if (terminal !== undefined) break
    }
    s.mapper = mapper
    if (terminal === undefined && !over) {
      if (events !== undefined) {
        if (!this.sink.emit(events)) this.pause()
      } else if (mapper.calls !== calls) {
        // A native tool call streams as no event until the end (its `Complete`): the run is still told it progresses.
        this.sink.progress?.()
      }
      return
    }
    // A clean end read before the body's own end drains; any other terminal aborts what is left at once.
    const drain = !over && terminal?._tag === "Complete"
    this.state = drain ? this.draining() : CLOSED
    if (events !== undefined) this.sink.emit(events)
    this.sink.end()
    if (!over && !drain) this.controller?.abort(readFailed())
  }

  /** A whole answer's events (its terminal last), or its failure: the run is over, nothing is left to read. */
  private wholeAnswered(events: ReadonlyArray<RunEvent.RunEvent>): void {
    this.state = CLOSED
    this.sink.emit(events)
    this.sink.end()
  }

  /** `events` with a last `Failed` (quoting upstream text) scrubbed and clipped. */
  private scrubbedAll(events: ReadonlyArray<RunEvent.RunEvent>): ReadonlyArray<RunEvent.RunEvent> {
    const last = events[events.length - 1]
    return last?._tag === "Failed" ? this.scrubbed(events, last) : events
  }

  // The end of an error answer's body, or as much of it as was read: its status, code, message and Retry-After.
  private errorAnswered(s: ErrorBody, over: boolean): void {
    // Scrubbed before anything is cut from it, so that no part of a key survives the cut.
    const bodyText = scrubSecrets(s.body, this.secret)
    const message = upstreamText(errorBodyMessage(bodyText), this.secret)
    const code = errorBodyCode(bodyText)
    const upstream: RunEvent.UpstreamAnswer = {
      status: s.status,
      message,
      ...(code !== undefined ? { code } : {}),
      ...(s.retryAfter !== undefined ? { retryAfter: s.retryAfter } : {})
    }
    this.state = CLOSED
    this.sink.emit([this.failed(`upstream answered HTTP ${s.status}: ${message}`, upstream)])
    this.sink.end()
    // The rest of an error answer is not worth its connection.
    if (!over) this.controller?.abort(readFailed())
  }

  /**
   * No byte of an answer came back. An upstream may close an idle keep-alive
   * connection just as it is reused: the request is sent once more, on a fresh
   * connection. Otherwise the request is over, with nothing left to drain.
   */
  private unanswered(s: Connecting, error: Error): void {
    if (!s.retried && this.dispatcher !== undefined && this.request !== undefined && isStaleConnection(error)) {
      this.state = RETRYING
      return void this.dispatcher.dispatch(this.request, this)
    }
    // The cause names the upstream's address: the log's, not the client's.
    this.log("upstream request failed", describeError(error))
    this.failBeforeResponse("upstream unreachable")
  }

  private draining(): Draining {
    const draining: Draining = {
      _tag: "draining",
      bytesLeft: DRAIN_BYTES,
      timer: setTimeout(() => {
        if (this.state === draining) this.stopDraining(draining, true)
      }, DRAIN_MS)
    }
    draining.timer.unref()
    return draining
  }

  private stopDraining(s: Draining, abort: boolean): void {
    clearTimeout(s.timer)
    this.state = CLOSED
    if (abort) this.controller?.abort(drainOver())
  }

  private pause(): void {
    this.controller?.pause()
    this.sink.onReady(this.resume)
  }

  private readonly resume = (): void => {
    if (this.state._tag === "streaming") this.controller?.resume()
  }

  /** A `Failed` event whose upstream text is scrubbed and clipped. */
  private failed(message: string, upstream?: RunEvent.UpstreamAnswer): RunEvent.RunEvent {
    return RunEvent.failed(upstreamText(message, this.secret), upstream)
  }

  /** A batch whose last event, a `Failed` quoting upstream text (the mapper's), is scrubbed and clipped. */
  private scrubbed(events: ReadonlyArray<RunEvent.RunEvent>, last: RunEvent.Failed): ReadonlyArray<RunEvent.RunEvent> {
    const message = upstreamText(last.message, this.secret)
    return message === last.message ? events : [...events.slice(0, -1), { ...last, message }]
  }
}

const isEventStream = (contentType: string | ReadonlyArray<string> | undefined): boolean =>
  (typeof contentType === "string" ? contentType : contentType?.[0] ?? "").toLowerCase().startsWith("text/event-stream")

const transportFailed = (message: string): Mapper.StreamInput => ({ _tag: "TransportFailed", message })

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
