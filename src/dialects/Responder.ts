import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { Readable } from "node:stream"
import type { ChatRequest } from "../chat/ChatRequest.js"
import { Chat, outcomeOf } from "../chat/ChatRun.js"
import { type RunOutcomeError, RunFailed } from "../chat/errors.js"
import { type Emission, isTerminal, type Terminal } from "../chat/session.js"
import { onClose } from "../common/onClose.js"
import { Metrics } from "../observability/Metrics.js"
import type { SubmitError } from "../run/errors.js"
import type { Rendered, RunInfo, StreamRenderer } from "./Dialect.js"
import { SessionBody } from "./SessionBody.js"

/**
 * The one response path of every dialect: a run's session, pulled batch by batch, written as it goes (live) or
 * collected first (strict-buffered streams, non-stream requests, with exact-replay retries in `Chat.collect`).
 * Dialects differ only in the renderers they pass. Each response is counted once, by its API and outcome.
 */
export declare namespace Responder {
  export interface Service {
    /**
     * The body of a streamed response (a Node `Readable`: written by the server with the socket's backpressure). Nothing is written before the run's first batch: submission errors, and a
     * run that fails before any output (an upstream rejection, a timeout with no event), fail here, to be answered
     * with their HTTP status; after that the body always ends with the renderer's terminal event. The run lives
     * in the caller's scope.
     */
    readonly stream: (
      request: ChatRequest,
      render: (run: RunInfo) => StreamRenderer
    ) => Effect.Effect<Readable, SubmitError | RunOutcomeError, Scope.Scope>
    /** Runs to the end (with strict retries) and returns the rendered non-stream body. */
    readonly complete: (
      request: ChatRequest,
      render: (run: RunInfo, emissions: ReadonlyArray<Emission>) => Rendered
    ) => Effect.Effect<unknown, SubmitError | RunOutcomeError, Scope.Scope>
  }
}

export class Responder extends Context.Tag("@iop/edge/Responder")<Responder, Responder.Service>() {}

/**
 * The run's failure, when a batch holds nothing but it (no output was produced before it): answered as an
 * HTTP error if nothing was written yet. Tool validation errors are the stream's own, written as stream events.
 */
export const failureBeforeOutput = (out: ReadonlyArray<Emission>): RunOutcomeError | undefined => {
  const only = out.length === 1 ? out[0] : undefined
  if (only === undefined || only._tag !== "Error") return undefined
  switch (only.error._tag) {
    case "ToolValidationFailed":
    case "ToolValidationRetryFailed":
      return undefined
    case "RunFailed":
    case "RunTimedOut":
    case "NoNodeAccepted":
    case "UpstreamRejected":
      return only.error
  }
}

const createdNow = Effect.map(Clock.currentTimeMillis, (ms) => Math.floor(ms / 1000))

export const make = Effect.gen(function* () {
  const chat = yield* Chat
  const metrics = yield* Metrics

  /**
   * Counts the response (stream or not) by its outcome once it is over, whatever ended it; logs, once, what the
   * request carried that its dialect did not forward.
   */
  const track = (request: ChatRequest, stream: boolean) =>
    Effect.gen(function* () {
      let terminal: Terminal | undefined
      const notForwarded = request.notForwarded
      if (notForwarded !== undefined) {
        const annotations: Record<string, string> = {}
        for (const [field, types] of Object.entries(notForwarded)) annotations[`not_forwarded_${field}`] = types
        yield* Effect.logDebug("request parts not forwarded").pipe(Effect.annotateLogs(annotations))
      }
      if (stream) {
        yield* metrics.streamOpened
        yield* onClose(metrics.streamClosed)
      }
      yield* onClose(
        Effect.suspend(() => metrics.request({ api: request.api, model: request.submit.model, stream, outcome: outcomeOf(terminal) }))
      )
      return (t: Terminal) => {
        terminal = t
      }
    })

  /** Live: the session's batches rendered as they come, one socket write per batch (`SessionBody`). */
  const live = (request: ChatRequest, render: (run: RunInfo) => StreamRenderer, ended: (t: Terminal) => void) =>
    Effect.gen(function* () {
      const created = yield* createdNow
      const run = yield* chat.open(request)
      const runtime = yield* Effect.runtime<never>()
      const noteTerminal = (out: ReadonlyArray<Emission>): void => {
        const last = out[out.length - 1]
        if (last !== undefined && isTerminal(last)) ended(last)
      }
      // Nothing is written before the run's first batch: a run that failed before any output (an upstream
      // rejection, an idle timeout) is still an HTTP error; otherwise the stream's head goes out with that batch.
      const first = yield* run.next
      const failure = first === undefined ? undefined : failureBeforeOutput(first)
      if (first !== undefined) noteTerminal(first)
      if (failure !== undefined) return yield* Effect.fail(failure)
      const renderer = render({ runId: run.dispatch.runId, created })
      // A defect (a bug) must not cut the stream short: it ends as one terminal error event.
      const onDefect = (defect: unknown): string => {
        Runtime.runSync(runtime)(
          Effect.logError("stream failed with a defect").pipe(
            Effect.annotateLogs({ error: defect instanceof Error ? defect.message.slice(0, 500) : "defect" })
          )
        )
        const error: Terminal = { _tag: "Error", error: new RunFailed({ reason: "internal error" }) }
        ended(error)
        return renderer.batch([error])
      }
      const head = renderer.head + (first === undefined ? "" : renderer.batch(first))
      const clock = yield* Effect.clock
      const now = () => clock.unsafeCurrentTimeMillis()
      const body = new SessionBody({ run, render: renderer.batch, onBatch: noteTerminal, onDefect, now }, head)
      // One fiber per stream, and only for dialects that ask: it sleeps by the Clock until the run has been silent.
      const keepAlive = renderer.keepAlive
      if (keepAlive !== undefined) {
        const loop = Effect.gen(function* () {
          for (;;) {
            const due = body.keepAliveDue(keepAlive.afterMs)
            if (due === undefined) return
            if (due > 0) yield* Effect.sleep(due)
            else body.keepAlive(keepAlive.text, keepAlive.afterMs)
          }
        })
        yield* Effect.forkScoped(loop)
      }
      return body
    })

  /** Strict stream buffer: collected and validated (maybe replayed) before the first byte is written. */
  const buffered = (request: ChatRequest, render: (run: RunInfo) => StreamRenderer, ended: (t: Terminal) => void) =>
    Effect.gen(function* () {
      const created = yield* createdNow
      const result = yield* chat.collect(request)
      ended(result.terminal)
      // Nothing was written: a run that failed before any output is an HTTP error, as it is live.
      const failure = failureBeforeOutput(result.emissions)
      if (failure !== undefined) return yield* Effect.fail(failure)
      // A result that did not validate is written as its error alone, like the non-stream 502.
      const renderer = render({ runId: result.dispatch.runId, created })
      const text = result.terminal._tag === "Error"
        ? renderer.head + renderer.batch([result.terminal])
        : renderer.head + renderer.batch(result.emissions)
      return Readable.from([Buffer.from(text)], { objectMode: false })
    })

  const stream: Responder.Service["stream"] = (request, render) =>
    Effect.gen(function* () {
      const ended = yield* track(request, true)
      return yield* (request.policy.buffered ? buffered(request, render, ended) : live(request, render, ended))
    })

  const complete: Responder.Service["complete"] = (request, render) =>
    Effect.gen(function* () {
      const ended = yield* track(request, false)
      const created = yield* createdNow
      const result = yield* chat.collect(request)
      ended(result.terminal)
      const rendered = render({ runId: result.dispatch.runId, created }, result.emissions)
      return rendered._tag === "Body" ? rendered.body : yield* Effect.fail(rendered.error)
    })

  return { stream, complete } satisfies Responder.Service
})

export const ResponderLive: Layer.Layer<Responder, never, Chat | Metrics> = Layer.effect(Responder, make)
