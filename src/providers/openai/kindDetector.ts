/**
 * A provider's upstream kind under `constraints: "auto"`, found out lazily: only a request that needs a constraint
 * asks for it. One probe at a time, its answer shared by every request waiting and kept for the provider's life; a
 * probe that got no answer (refused, timed out) answers "none" for now and lets the next one go out no sooner than
 * `RETRY_AFTER` later, by the Clock. Free and passive beside it: an answer whose `Server` header is llama.cpp's
 * settles a kind not yet known. Logged once it is known.
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import type { ProbeOutcome } from "./kindProbe.js"
import { describeKind, isLlamaCppServer, LLAMA_CPP, NO_KIND, type UpstreamKind } from "./upstreamKind.js"

export const RETRY_AFTER = Duration.seconds(30)
const RETRY_AFTER_MS = Duration.toMillis(RETRY_AFTER)

type State =
  | { readonly _tag: "Unknown" }
  | { readonly _tag: "Probing"; readonly done: Deferred.Deferred<UpstreamKind> }
  | { readonly _tag: "Known"; readonly kind: UpstreamKind }
  /** The last probe got no answer, at this Clock time (ms). */
  | { readonly _tag: "Unsettled"; readonly at: number }

export interface KindDetector {
  /** The upstream's kind: at once when known, else from a probe (the one under way, or a new one). */
  readonly kind: Effect.Effect<UpstreamKind>
  /** An upstream answer's `Server` header: llama.cpp's settles a kind not known yet (true when it did). */
  readonly heard: (server: string | ReadonlyArray<string> | undefined) => boolean
}

export const makeKindDetector = (options: {
  readonly probe: Effect.Effect<ProbeOutcome>
  /** What the provider knows already (its node read `/props` for `toolFormats: "auto"`). */
  readonly known?: UpstreamKind | undefined
  /** Added to the log lines (the upstream model). */
  readonly annotations?: Readonly<Record<string, string>>
}): KindDetector => {
  let state: State = options.known === undefined ? { _tag: "Unknown" } : { _tag: "Known", kind: options.known }
  const annotations = options.annotations ?? {}

  const settle = (done: Deferred.Deferred<UpstreamKind>, outcome: ProbeOutcome, now: number): Effect.Effect<void> => {
    // The Server header may have told first.
    if (state._tag === "Known") return Deferred.succeed(done, state.kind)
    state = outcome.settled ? { _tag: "Known", kind: outcome.kind } : { _tag: "Unsettled", at: now }
    const fields = { ...annotations, asked: outcome.asked.join(" ") }
    const log = outcome.settled
      ? Effect.logInfo("upstream kind").pipe(Effect.annotateLogs({ ...fields, constraints: describeKind(outcome.kind) }))
      : Effect.logInfo("upstream kind unknown for now").pipe(
        Effect.annotateLogs({ ...fields, retry_after_s: String(RETRY_AFTER_MS / 1000) })
      )
    return Effect.zipRight(log, Deferred.succeed(done, outcome.kind))
  }

  /** A new probe, run apart from the request that started it: a request that goes away does not stop it. */
  const begin = (): Effect.Effect<UpstreamKind> => {
    const done = Deferred.unsafeMake<UpstreamKind>(FiberId.none)
    const probing: State = { _tag: "Probing", done }
    state = probing
    const run = options.probe.pipe(
      Effect.flatMap((outcome) => Effect.flatMap(Clock.currentTimeMillis, (now) => settle(done, outcome, now))),
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          if (state === probing) state = { _tag: "Unknown" }
          Deferred.unsafeDone(done, Exit.succeed(NO_KIND))
        })
      )
    )
    return Effect.zipRight(Effect.forkDaemon(run), Deferred.await(done))
  }

  // The state is read and set in one synchronous step: two requests at once start one probe.
  const kind = Effect.clockWith((clock) =>
    Effect.suspend((): Effect.Effect<UpstreamKind> => {
      switch (state._tag) {
        case "Known":
          return Effect.succeed(state.kind)
        case "Probing":
          return Deferred.await(state.done)
        case "Unsettled":
          return clock.unsafeCurrentTimeMillis() - state.at < RETRY_AFTER_MS ? Effect.succeed(NO_KIND) : begin()
        case "Unknown":
          return begin()
      }
    })
  )

  const heard = (server: string | ReadonlyArray<string> | undefined): boolean => {
    if (state._tag === "Known" || !isLlamaCppServer(server)) return false
    const before = state
    state = { _tag: "Known", kind: LLAMA_CPP }
    if (before._tag === "Probing") Deferred.unsafeDone(before.done, Exit.succeed(LLAMA_CPP))
    return true
  }

  return { kind, heard }
}
