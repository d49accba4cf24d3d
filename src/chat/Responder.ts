import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { Readable } from "node:stream"
import type { ChatRequest } from "./ChatRequest.js"
import { Chat, type ChatRun, outcomeOf } from "./ChatRun.js"
import { type RunOutcomeError, RunFailed } from "./errors.js"
import { type Emission, isTerminal, type Terminal } from "./session.js"
import { logAnnotated } from "../observability/Logging.js"
import { Metrics } from "../observability/Metrics.js"
import type { SubmitError } from "../protocol/errors.js"
import { type ItemRenderer, KEEP_ALIVE_AFTER_MS, type Rendered, type RunInfo, type StreamRenderer } from "./Rendering.js"
import * as Watchdog from "../run/Watchdog.js"
import { SessionBody, settledBody } from "./SessionBody.js"
import * as RunSpans from "./runSpans.js"

/**
 * The one response path of every dialect: a run's session, pulled batch by batch, written as it goes (live) or
 * collected first (strict-buffered streams, non-stream requests, with exact-replay retries in `Chat.collect`).
 * Dialects differ only in the renderers they pass; a typed caller's stream (`items`) is the same response with
 * values for text. Each response is counted once, by its API and outcome.
 */
export declare namespace Responder {
  export interface Service {
    /**
     * The body of a streamed response (a Node `Readable`: written by the server with the socket's backpressure),
     * from the moment the upstream accepted the run (its head and what arrived by then; keep-alives while it is
     * silent). Submission errors and a run that fails before it was accepted (an upstream rejection, unreachable,
     * an idle timeout with no answer) fail here, to be answered with their HTTP status; after that the body always
     * ends with the renderer's terminal event. The run lives in the caller's scope.
     */
    readonly stream: (
      request: ChatRequest,
      render: (run: RunInfo) => StreamRenderer
    ) => Effect.Effect<Readable, SubmitError | RunOutcomeError, Scope.Scope>
    /**
     * A streamed response as typed items, for callers in code: what `render` makes of each emission, live or (for
     * strict-buffered requests) once the run was collected, as `stream` writes them. Every failure — a submission
     * error, the run's failure before or after output — fails the stream with its typed error. The run lives in
     * the stream's scope: closing or interrupting the stream cancels it.
     */
    readonly items: <A>(
      request: ChatRequest,
      render: (run: RunInfo) => ItemRenderer<A>
    ) => Stream.Stream<A, SubmitError | RunOutcomeError>
    /** Runs to the end (with strict retries) and returns the rendered non-stream body. */
    readonly complete: <B>(
      request: ChatRequest,
      render: (run: RunInfo, emissions: ReadonlyArray<Emission>) => Rendered<B>
    ) => Effect.Effect<B, SubmitError | RunOutcomeError, Scope.Scope>
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
    case "UpstreamRejected":
      return only.error
  }
}

const createdNow = Effect.map(Clock.currentTimeMillis, (ms) => Math.floor(ms / 1000))

/** How long a stream whose upstream accepted it waits for its first output before it starts without it. */
export const OPENING_GRACE_MS = 250

type Live = { readonly _tag: "Live"; readonly info: RunInfo; readonly run: ChatRun; readonly first: ReadonlyArray<Emission> | undefined }
type Collected = { readonly _tag: "Collected"; readonly info: RunInfo; readonly emissions: ReadonlyArray<Emission> }
/** A streamed response's run once its upstream accepted it (live) or once all of it was collected (strict-buffered). */
type Opened = Live | Collected

const noteTerminal = (out: ReadonlyArray<Emission>, ended: (t: Terminal) => void): void => {
  const last = out[out.length - 1]
  if (last !== undefined && isTerminal(last)) ended(last)
}

const internalError = () => new RunFailed({ reason: "internal error" })

/** A response being counted (and traced): how it ended, or the error that kept it from running. */
interface Tracked {
  /** The request's run span, when the caller traces. */
  readonly span: RunSpans.RunSpan | undefined
  readonly ended: (t: Terminal) => void
  readonly failed: (e: SubmitError) => void
}

/** A run's submission; traced, its error is the run span's (no run reported it). */
const submitted = <A, R>(tracked: Tracked, effect: Effect.Effect<A, SubmitError, R>): Effect.Effect<A, SubmitError, R> =>
  tracked.span === undefined ? effect : Effect.tapError(effect, (e) => Effect.sync(() => tracked.failed(e)))

const logDefect = (defect: unknown) =>
  Effect.logError("stream failed with a defect").pipe(
    Effect.annotateLogs({ error: defect instanceof Error ? defect.message.slice(0, 500) : "defect" })
  )

export const make = Effect.gen(function* () {
  const chat = yield* Chat
  const metrics = yield* Metrics
  const keepAlives = yield* Watchdog.make(KEEP_ALIVE_AFTER_MS)
  const graces = yield* Watchdog.make(OPENING_GRACE_MS)
  const clock = yield* Effect.clock

  /**
   * `run.next` for at most the opening grace, else `otherwise`: from the run's callbacks, the process's one grace
   * watchdog for the bound (no race and no fiber per stream). A defect while folding fails here, as in `next`.
   */
  const nextWithinGrace = (run: ChatRun, otherwise: ReadonlyArray<Emission>) =>
    Effect.async<ReadonlyArray<Emission> | undefined>((resume) => {
      let done = false
      const finish = (out: ReadonlyArray<Emission> | undefined): void => {
        done = true
        unwatch()
        resume(Effect.succeed(out))
      }
      const attempt = (): void => {
        if (done) return
        try {
          const out = run.poll()
          if (out === "pending") run.whenReady(attempt)
          else finish(out === "ended" ? undefined : out)
        } catch (defect) {
          done = true
          unwatch()
          resume(Effect.die(defect))
        }
      }
      const dueAt = clock.unsafeCurrentTimeMillis() + OPENING_GRACE_MS
      const unwatch = graces.watch({
        dueAt,
        onIdle: () => {
          if (done) return
          run.unwatch()
          finish(otherwise)
        }
      })
      attempt()
      return Effect.sync(() => {
        done = true
        unwatch()
        run.unwatch()
      })
    })

  /**
   * Counts the response (stream or not) by its outcome once it is over, whatever ended it; logs, once, what the
   * request carried that its dialect did not forward. When the caller traces, the request's run span begins here
   * and ends with the response (its outcome, and the error that failed it before any run if one did).
   */
  const track = (request: ChatRequest, stream: boolean) =>
    Effect.gen(function* () {
      let terminal: Terminal | undefined
      let failure: SubmitError | undefined
      const notForwarded = request.notForwarded
      if (notForwarded !== undefined) {
        yield* logAnnotated(LogLevel.Debug, "request parts not forwarded", () => {
          const annotations: Record<string, string> = {}
          for (const [field, types] of Object.entries(notForwarded)) annotations[`not_forwarded_${field}`] = types
          return annotations
        })
      }
      if (stream) yield* metrics.streamOpened
      // The run span begins in the step that registers the finalizer ending it (no step of its own).
      return yield* Effect.withFiberRuntime<Tracked, never, Scope.Scope>((fiber) => {
        const span = RunSpans.beginRun(fiber, request, stream)
        // One finalizer for all: the span, the response's count, then the open-stream gauge (a gauge at 0 means
        // every count is in).
        const counted = Effect.suspend(() => {
          const outcome = outcomeOf(terminal)
          if (span !== undefined) {
            RunSpans.endRun(span, failure === undefined ? outcome : "error", terminal?._tag === "Error" ? terminal.error : failure)
          }
          return metrics.request({ api: request.api, model: request.submit.model, stream, outcome })
        })
        const tracked: Tracked = {
          span,
          ended: (t) => {
            terminal = t
          },
          failed: (e) => {
            failure = e
          }
        }
        const scope = Context.unsafeGet(fiber.currentContext, Scope.Scope)
        return Effect.as(Scope.addFinalizer(scope, stream ? Effect.zipRight(counted, metrics.streamClosed) : counted), tracked)
      })
    })

  /**
   * A streamed response's run, up to its start: live (the run, once its upstream accepted it, with what arrived
   * by then) or, strict-buffered, collected and validated (maybe replayed) first. Nothing is written before this:
   * a run that failed before it started (an upstream rejection, unreachable, no node) fails here, to be answered
   * as an HTTP error.
   */
  const open = (request: ChatRequest, tracked: Tracked) =>
    Effect.gen(function* () {
      const { ended } = tracked
      const created = yield* createdNow
      if (request.policy.buffered) {
        const result = yield* submitted(tracked, chat.collect(request, tracked.span))
        ended(result.terminal)
        const failure = failureBeforeOutput(result.emissions)
        if (failure !== undefined) return yield* Effect.fail(failure)
        // A result that did not validate is written as its error alone, like the non-stream 502.
        const emissions = result.terminal._tag === "Error" ? [result.terminal] : result.emissions
        return { _tag: "Collected", info: { runId: result.dispatch.runId, created }, emissions } satisfies Opened
      }
      const run = yield* submitted(tracked, chat.open(request, tracked.span))
      // The response starts once the upstream accepted the run (or it produced something): a silent prefill
      // then gets its headers, the API's opening event and keep-alives at once, not a first byte minutes later.
      const opening = yield* run.opening
      // Accepted with nothing yet: a short grace first. A failure right after the upstream's 200 (its error
      // event, an oversize first event) is still answered with its HTTP status, and a first token that follows at
      // once goes out in the head's write.
      const first = opening !== undefined && opening.length === 0
        ? yield* nextWithinGrace(run, opening)
        : opening
      if (first !== undefined) noteTerminal(first, ended)
      const failure = first === undefined ? undefined : failureBeforeOutput(first)
      if (failure !== undefined) return yield* Effect.fail(failure)
      return { _tag: "Live", info: { runId: run.dispatch.runId, created }, run, first } satisfies Opened
    })

  /** Live: the session's batches rendered as they come, one socket write per batch (`SessionBody`). */
  const live = (opened: Live, renderer: StreamRenderer, ended: (t: Terminal) => void) =>
    Effect.gen(function* () {
      const runtime = yield* Effect.runtime<never>()
      // A defect (a bug) must not cut the stream short: it ends as one terminal error event.
      const onDefect = (defect: unknown): string => {
        Runtime.runSync(runtime)(logDefect(defect))
        const error: Terminal = { _tag: "Error", error: internalError() }
        ended(error)
        return renderer.batch([error])
      }
      const head = renderer.head + (opened.first === undefined ? "" : renderer.batch(opened.first))
      const now = () => clock.unsafeCurrentTimeMillis()
      const onBatch = (out: ReadonlyArray<Emission>) => noteTerminal(out, ended)
      const body = new SessionBody({ run: opened.run, render: renderer.batch, onBatch, onDefect, now, settle: renderer.settle }, head)
      // No fiber per stream: the process's one keep-alive watchdog calls back once the body was silent this long.
      const text = renderer.keepAlive
      if (text !== undefined) {
        const silent: Watchdog.Watched = {
          get dueAt() {
            return body.lastWriteAt + KEEP_ALIVE_AFTER_MS
          },
          onIdle: () => {
            if (body.keepAlive(text)) unwatch = keepAlives.watch(silent)
          }
        }
        let unwatch = keepAlives.watch(silent)
        body.once("close", () => unwatch())
      }
      return body
    })

  const stream: Responder.Service["stream"] = (request, render) =>
    Effect.gen(function* () {
      const tracked = yield* track(request, true)
      const opened = yield* open(request, tracked)
      const renderer = render(opened.info)
      if (opened._tag === "Live") return yield* live(opened, renderer, tracked.ended)
      const text = renderer.head + renderer.batch(opened.emissions)
      if (renderer.settle !== undefined) return settledBody(text, renderer.settle)
      return Readable.from([Buffer.from(text)], { objectMode: false })
    })

  /**
   * The same response for a typed consumer: one Stream pull per batch (the head comes with the first), the
   * emissions before a failure given as items, then the failure.
   */
  const items: Responder.Service["items"] = <A>(request: ChatRequest, render: (run: RunInfo) => ItemRenderer<A>) =>
    Stream.unwrapScoped(
      Effect.gen(function* () {
        const tracked = yield* track(request, true)
        const { ended } = tracked
        const opened = yield* open(request, tracked)
        const renderer = render(opened.info)
        let failure: RunOutcomeError | undefined
        const itemsOf = (batch: ReadonlyArray<Emission>, out: Array<A>): Array<A> => {
          for (const e of batch) {
            if (e._tag === "Error") failure = e.error
            else renderer.emission(e, out)
          }
          return out
        }
        const head = itemsOf(opened._tag === "Live" ? opened.first ?? [] : opened.emissions, [...renderer.head])
        // A defect (a bug) stays a defect for a typed caller; the response is still counted as failed.
        const next = opened._tag === "Live"
          ? Effect.tapDefect(opened.run.next, (defect) =>
            Effect.zipRight(logDefect(defect), Effect.sync(() => ended({ _tag: "Error", error: internalError() }))))
          : Effect.succeed(undefined)
        const pull = Effect.suspend((): Effect.Effect<Chunk.Chunk<A>, Option.Option<RunOutcomeError>> => {
          if (failure !== undefined) return Effect.fail(Option.some(failure))
          return Effect.flatMap(next, (batch) => {
            if (batch === undefined) return Effect.fail(Option.none())
            noteTerminal(batch, ended)
            const out = itemsOf(batch, [])
            return out.length === 0 && failure !== undefined
              ? Effect.fail(Option.some(failure))
              : Effect.succeed(Chunk.unsafeFromArray(out))
          })
        })
        return Stream.concat(Stream.fromIterable(head), Stream.repeatEffectChunkOption(pull))
      })
    )

  const complete: Responder.Service["complete"] = <B>(
    request: ChatRequest,
    render: (run: RunInfo, emissions: ReadonlyArray<Emission>) => Rendered<B>
  ) =>
    Effect.gen(function* () {
      const tracked = yield* track(request, false)
      const created = yield* createdNow
      const result = yield* submitted(tracked, chat.collect(request, tracked.span))
      tracked.ended(result.terminal)
      const rendered = render({ runId: result.dispatch.runId, created }, result.emissions)
      return rendered._tag === "Body" ? rendered.body : yield* Effect.fail(rendered.error)
    })

  return { stream, items, complete } satisfies Responder.Service
})

export const layer: Layer.Layer<Responder, never, Chat | Metrics> = Layer.scoped(Responder, make)
