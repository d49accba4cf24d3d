import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { ChatRequest } from "../../chat/ChatRequest.js"
import { Chat, type Collected, outcomeOf } from "../../chat/ChatRun.js"
import { type RunOutcomeError, RunFailed } from "../../chat/errors.js"
import type { Emission, Terminal } from "../../chat/session.js"
import { Metrics } from "../../observability/Metrics.js"
import type { SubmitError } from "../../run/errors.js"
import type { RunDispatch } from "../../run/RunService.js"
import * as Render from "./render.js"
import { onClose } from "../../common/onClose.js"

export declare namespace ChatCompletions {
  export interface Service {
    /**
     * The SSE body of a streamed request: live (each batch written as it
     * arrives) or, for a strict `streamBuffer` model, collected and
     * validated first. Nothing is written before the run's first batch:
     * submission errors, and a run that fails before any output (an
     * upstream rejection, a timeout with no event), fail here, to be answered
     * with their HTTP status; after that the body always ends with one
     * terminal event and `[DONE]`. The run lives in the caller's scope.
     */
    readonly stream: (
      request: ChatRequest
    ) => Effect.Effect<Stream.Stream<Uint8Array>, SubmitError | RunOutcomeError, Scope.Scope>
    /** Runs to the end (with strict retries) and returns the `chat.completion` body. */
    readonly complete: (request: ChatRequest) => Effect.Effect<unknown, SubmitError | RunOutcomeError, Scope.Scope>
  }
}

export class ChatCompletions extends Context.Tag("@iop/edge/ChatCompletions")<
  ChatCompletions,
  ChatCompletions.Service
>() {}

/**
 * The run's failure, when a batch holds nothing but it (no output was produced before it): answered as an
 * HTTP error if nothing was written yet. Tool validation errors are the stream's own, written as SSE events.
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

const encoder = new TextEncoder()
const bytes = (text: string): Chunk.Chunk<Uint8Array> => Chunk.of(encoder.encode(text))

export const make = Effect.gen(function* () {
  const chat = yield* Chat
  const metrics = yield* Metrics

  const context = (request: ChatRequest, dispatch: RunDispatch, created: number): Render.ResponseContext => ({
    id: `chatcmpl-${dispatch.runId.slice(4)}`,
    created,
    model: request.submit.model,
    reasoningField: request.policy.reasoningField,
    includeUsage: request.includeUsage,
    logprobs: request.submit.sampling.logprobs === true
  })

  /** Counts the response (stream or not) by its outcome once it is over, whatever ended it. */
  const track = (request: ChatRequest, stream: boolean) =>
    Effect.gen(function* () {
      let terminal: Terminal | undefined
      if (stream) {
        yield* metrics.streamOpened
        yield* onClose(metrics.streamClosed)
      }
      yield* onClose(
        Effect.suspend(() => metrics.request({ model: request.submit.model, stream, outcome: outcomeOf(terminal) }))
      )
      return (t: Terminal) => {
        terminal = t
      }
    })

  const createdNow = Effect.map(Clock.currentTimeMillis, (ms) => Math.floor(ms / 1000))

  /** Live: the session's batches rendered as they come, one socket write per pulled batch. */
  const live = (request: ChatRequest, ended: (t: Terminal) => void) =>
    Effect.gen(function* () {
      const created = yield* createdNow
      const run = yield* chat.open(request)
      const render = Render.chunkRenderer(context(request, run.dispatch, created))
      let finished = false
      // A defect (a bug) must not cut the stream short: it ends as one run_error and `[DONE]`.
      const next = run.next.pipe(
        Effect.catchAllDefect((defect) =>
          Effect.logError("stream failed with a defect").pipe(
            Effect.annotateLogs({ error: defect instanceof Error ? defect.message.slice(0, 500) : "defect" }),
            Effect.as([{ _tag: "Error", error: new RunFailed({ reason: "internal error" }) }] as const)
          )
        )
      )
      const noteTerminal = (out: ReadonlyArray<Emission>): void => {
        const last = out[out.length - 1]
        if (last !== undefined && (last._tag === "Finish" || last._tag === "Error")) {
          finished = true
          ended(last)
        }
      }
      // Nothing is written before the run's first batch: a run that failed before any output (an upstream
      // rejection, an idle timeout) is still an HTTP error; otherwise the role chunk goes out with that batch.
      const first = yield* next
      const failure = first === undefined ? undefined : failureBeforeOutput(first)
      if (first !== undefined) noteTerminal(first)
      if (failure !== undefined) return yield* Effect.fail(failure)
      let pending: Chunk.Chunk<Uint8Array> | undefined = bytes(render.role + (first === undefined ? "" : render.batch(first)))
      // One pull per batch, each rendered into one write.
      const pull: Effect.Effect<Chunk.Chunk<Uint8Array>, Option.Option<never>> = Effect.suspend(() => {
        if (pending !== undefined) {
          const out = pending
          pending = undefined
          return Effect.succeed(out)
        }
        if (finished) return Effect.fail(Option.none())
        return Effect.flatMap(next, (out) => {
          if (out === undefined) return Effect.fail(Option.none())
          noteTerminal(out)
          const text = render.batch(out)
          return Effect.succeed(text === "" ? Chunk.empty() : bytes(text))
        })
      })
      return Stream.repeatEffectChunkOption(pull)
    })

  /** Strict stream buffer: collected and validated (maybe replayed) before the first byte is written. */
  const buffered = (request: ChatRequest, ended: (t: Terminal) => void) =>
    Effect.gen(function* () {
      const created = yield* createdNow
      const result = yield* chat.collect(request)
      ended(result.terminal)
      // Nothing was written: a run that failed before any output is an HTTP error, as it is live.
      const failure = failureBeforeOutput(result.emissions)
      if (failure !== undefined) return yield* Effect.fail(failure)
      // A result that did not validate is written as its error alone, like the non-stream 502.
      const render = Render.chunkRenderer(context(request, result.dispatch, created))
      const text = result.terminal._tag === "Error"
        ? render.batch([result.terminal])
        : render.role + render.batch(result.emissions)
      return Stream.fromChunk(bytes(text))
    })

  const stream = (request: ChatRequest) =>
    Effect.gen(function* () {
      const ended = yield* track(request, true)
      return yield* (request.policy.buffered ? buffered(request, ended) : live(request, ended))
    }).pipe(Effect.withSpan("ChatCompletions.stream"))

  const complete = (request: ChatRequest) =>
    Effect.gen(function* () {
      const ended = yield* track(request, false)
      const created = yield* createdNow
      const result: Collected = yield* chat.collect(request)
      ended(result.terminal)
      const rendered = Render.completion(context(request, result.dispatch, created), result.emissions)
      return rendered._tag === "Body" ? rendered.body : yield* Effect.fail(rendered.error)
    }).pipe(Effect.withSpan("ChatCompletions.complete"))

  return { stream, complete } satisfies ChatCompletions.Service
})

export const ChatCompletionsLive: Layer.Layer<ChatCompletions, never, Chat | Metrics> = Layer.effect(
  ChatCompletions,
  make
)
