import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { RunError } from "./errors.js"
import type { RunEvent } from "./RunEvent.js"
import type { RunSink } from "./RunSink.js"

/** Events a run may hold unread before its producer is asked to pause. */
export const HIGH_WATER_EVENTS = 512

/**
 * What a reader finds: the events that arrived since its last read (`done`: they are all there will be), or the
 * outcome that ended the run otherwise (node lost, idle timeout, cancelled), once the events before it were read.
 */
export type RunRead =
  | { readonly _tag: "Events"; readonly events: ReadonlyArray<RunEvent>; readonly done: boolean }
  | { readonly _tag: "Failed"; readonly error: RunError }

const NOTHING: ReadonlyArray<RunEvent> = []

/** When a run's text arrived: the first and the last batch that carried any (`performance.now()`), and how many did. */
export interface TokenTiming {
  readonly firstAt: number | undefined
  readonly lastAt: number
  readonly batches: number
}

const carriesText = (events: ReadonlyArray<RunEvent>): boolean => {
  for (const e of events) if (e._tag === "Delta" || e._tag === "ReasoningDelta") return true
  return false
}

/**
 * One run's events in one place: the sink every writer uses (the provider
 * or bus subscription, node loss, the idle watchdog, cancellation), read by
 * one reader — synchronously (`read` + `onReady`, for a response body written
 * from callbacks) or as an Effect (`take`). Writing never blocks; a reader that
 * falls behind pauses the producer instead (`emit` returns false).
 */
export class RunChannel implements RunSink {
  /** When the last batch arrived, by the run plane's clock (read by the idle watchdog). */
  lastEventAt: number
  private buffer: Array<RunEvent> = []
  private ended: "open" | "done" | "failed" = "open"
  private failure: RunError | undefined = undefined
  private reported = false
  private resume: (() => void) | undefined = undefined
  private wake: (() => void) | undefined = undefined
  private settledWake: (() => void) | undefined = undefined
  private readonly tokens = { firstAt: undefined as number | undefined, lastAt: 0, batches: 0 }
  /** Stamped as the events arrive, whenever the reader folds them. */
  readonly timing: TokenTiming = this.tokens

  constructor(private readonly now: () => number) {
    this.lastEventAt = now()
  }

  readonly emit = (events: ReadonlyArray<RunEvent>): boolean => {
    if (this.ended !== "open") return true
    this.lastEventAt = this.now()
    if (carriesText(events)) {
      const at = performance.now()
      this.tokens.firstAt ??= at
      this.tokens.lastAt = at
      this.tokens.batches += 1
    }
    for (const e of events) this.buffer.push(e)
    this.ready()
    return this.buffer.length < HIGH_WATER_EVENTS
  }

  /** The upstream accepted the run (or its first batch arrived): the response may start. */
  accepted = false

  readonly accept = (): void => {
    if (this.ended !== "open" || this.accepted) return
    this.accepted = true
    this.ready()
  }

  readonly end = (): void => {
    if (this.ended !== "open") return
    this.ended = "done"
    this.ready()
  }

  readonly fail = (error: RunError): void => {
    if (this.ended !== "open") return
    this.ended = "failed"
    this.failure = error
    this.ready()
  }

  /** The producer waits for the reader: called once the reader took what was there. */
  readonly onReady = (resume: () => void): void => {
    this.resume = resume
  }

  /** What is there to read now; `undefined` while nothing arrived (then `onReadable` says when). */
  readonly read = (): RunRead | undefined => {
    if (this.buffer.length > 0) {
      const events = this.buffer
      this.buffer = []
      this.pulled()
      return { _tag: "Events", events, done: this.ended === "done" }
    }
    switch (this.ended) {
      case "open":
        return undefined
      case "done":
        return { _tag: "Events", events: NOTHING, done: true }
      case "failed":
        if (this.reported || this.failure === undefined) return { _tag: "Events", events: NOTHING, done: true }
        this.reported = true
        return { _tag: "Failed", error: this.failure }
    }
  }

  /** Calls `wake` once, when something can be read (at once if something can now). */
  readonly onReadable = (wake: () => void): void => {
    if (this.buffer.length > 0 || this.ended !== "open") wake()
    else this.wake = wake
  }

  /**
   * Calls `wake` once, when the run has ended or holds as many events as it may before its producer pauses (at
   * once if it does now): for a reader that collects the whole run, which then folds a few large reads instead
   * of one per upstream read.
   */
  readonly onSettled = (wake: () => void): void => {
    if (this.settled()) wake()
    else this.settledWake = wake
  }

  /** `read` as an Effect, waiting while nothing arrived. */
  readonly take: Effect.Effect<RunRead> = Effect.suspend(() => {
    const now = this.read()
    if (now !== undefined) return Effect.succeed(now)
    return Effect.async<RunRead>((resume) => {
      this.onReadable(() => resume(Effect.sync(() => this.read() ?? { _tag: "Events", events: NOTHING, done: false })))
      return Effect.sync(() => {
        this.wake = undefined
      })
    })
  })

  /** The events as a Stream, for callers that want one: ends with the run's events, fails with its outcome. */
  readonly events: Stream.Stream<RunEvent, RunError> = Stream.repeatEffectChunkOption(
    Effect.flatMap(this.take, (r): Effect.Effect<Chunk.Chunk<RunEvent>, Option.Option<RunError>> => {
      if (r._tag === "Failed") return Effect.fail(Option.some(r.error))
      if (r.done && r.events.length === 0) return Effect.fail(Option.none())
      return Effect.succeed(Chunk.unsafeFromArray(r.events.slice()))
    })
  )

  private settled(): boolean {
    return this.ended !== "open" || this.buffer.length >= HIGH_WATER_EVENTS
  }

  private ready(): void {
    const settledWake = this.settledWake
    if (settledWake !== undefined && this.settled()) {
      this.settledWake = undefined
      settledWake()
    }
    const wake = this.wake
    if (wake === undefined) return
    this.wake = undefined
    wake()
  }

  /** The reader took what was there: a paused producer may go on. */
  private pulled(): void {
    const resume = this.resume
    if (resume === undefined) return
    this.resume = undefined
    resume()
  }
}
