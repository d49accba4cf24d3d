import { type RunError, StreamClosed } from "../protocol/errors.js"
import { isTerminal, type RunEvent } from "../protocol/RunEvent.js"
import type { RunSink } from "../protocol/RunSink.js"

/** Events a run may hold unread before its producer is asked to pause. */
export const HIGH_WATER_EVENTS = 512

/**
 * What a reader finds: the events that arrived since its last read (`done`: they are all there will be, the last
 * is the run's terminal event), or the outcome that ended the run otherwise (node lost, idle timeout, cancelled,
 * a stream that closed without a terminal), once the events before it were read.
 */
export type RunRead =
  | { readonly _tag: "Events"; readonly events: ReadonlyArray<RunEvent>; readonly done: boolean }
  | { readonly _tag: "Failed"; readonly error: RunError }

/**
 * What a waiting reader waits for: `readable`, anything to read (or the run's end); `settled`, the run's end or as
 * many events as the channel holds before its producer pauses (a reader that collects the whole run folds a few
 * large reads, not one per upstream read); `started`, the upstream accepted the run, or anything to read.
 */
export type ReadyWhen = "readable" | "settled" | "started"

const NOTHING: ReadonlyArray<RunEvent> = []

/** When a run's text arrived: the first and the last batch that carried any (`performance.now()`), and how many did. */
export interface TokenTiming {
  readonly firstAt: number | undefined
  readonly lastAt: number
  readonly batches: number
}

/**
 * One run's events in one place, and the one terminator of its event stream: it accepts nothing after the first
 * terminal event, and turns an end without one into `StreamClosed`, whatever the transport or provider. Written
 * from callbacks by every writer (the provider or bus subscription, node loss, the watchdog, cancellation); read
 * by one reader: `read`, and `onReady` to be called back when there is something (no fiber, no queue). Writing
 * never blocks; a reader that falls behind pauses the producer instead (`emit` returns false).
 */
export class RunChannel implements RunSink {
  /**
   * When the run last made progress, by the run plane's clock: a batch arrived, or the reader took one. The
   * watchdog ends a run that made none for its idle time (an upstream that went silent, or a client whose
   * socket stopped taking bytes: both stop the reads).
   */
  lastProgressAt: number
  /** The upstream accepted the run (or its first batch arrived): the response may start. */
  accepted = false
  /** Since when the producer waits on a whole answer (`awaitWhole`), until its first batch; else undefined. */
  wholeSince: number | undefined = undefined
  /**
   * The answer began: a content or reasoning event arrived, or the producer reported output that has no event yet
   * (`progress`: a native tool call). A role-only chunk, a keep-alive, usage or `accept` is none of these.
   */
  answering = false
  /** The run's terminal event, once it arrived (what the run plane reads of its node's health as the run ends). */
  terminal: RunEvent | undefined = undefined
  private buffer: Array<RunEvent> = []
  private state: "open" | "done" | "failed" = "open"
  private failedWith: RunError | undefined = undefined
  private reported = false
  private resume: (() => void) | undefined = undefined
  private wake: (() => void) | undefined = undefined
  private wakeWhen: ReadyWhen = "readable"
  private onHalt: ((error: RunError) => void) | undefined = undefined
  private readonly tokens = { firstAt: undefined as number | undefined, lastAt: 0, batches: 0 }
  /** Stamped as the events arrive, whenever the reader folds them. */
  readonly timing: TokenTiming = this.tokens

  /**
   * @param terminate what `fail` does: the run service ends the run early through it (the channel fails with
   *   the error and the run's scope closes); by default the channel only halts (`halt`).
   */
  constructor(
    private readonly now: () => number,
    private readonly terminate: (error: RunError) => void = (error) => this.halt(error)
  ) {
    this.lastProgressAt = now()
  }

  readonly emit = (events: ReadonlyArray<RunEvent>): boolean => {
    if (this.state !== "open") return true
    this.lastProgressAt = this.now()
    this.wholeSince = undefined
    this.accepted = true
    let text = false
    for (const e of events) {
      this.buffer.push(e)
      if (e._tag === "Delta" || e._tag === "ReasoningDelta") text = true
      else if (isTerminal(e)) {
        this.state = "done"
        this.terminal = e
        break
      }
    }
    if (text) {
      this.answering = true
      const at = performance.now()
      this.tokens.firstAt ??= at
      this.tokens.lastAt = at
      this.tokens.batches += 1
    }
    this.ready()
    return this.buffer.length < HIGH_WATER_EVENTS
  }

  readonly accept = (): void => {
    if (this.accepted || this.state !== "open") return
    this.accepted = true
    this.ready()
  }

  readonly awaitWhole = (waiting: boolean): void => {
    if (this.state !== "open") return
    // Leaving the wait is progress: the idle bound starts from here, not from the request's start.
    this.lastProgressAt = this.now()
    this.wholeSince = waiting && this.buffer.length === 0 ? this.lastProgressAt : undefined
  }

  readonly progress = (): void => {
    if (this.state !== "open") return
    this.lastProgressAt = this.now()
    this.answering = true
  }

  /** The producer has nothing more: after the run's terminal event that changes nothing; before it, the stream closed. */
  readonly end = (): void => {
    // Built only when it is the outcome: an error captures a stack trace, and every run ends with `end()`.
    if (this.state === "open") this.stop(new StreamClosed())
  }

  /** Ends the run early with `error` (the run service's `terminate`: the run's scope closes too). */
  readonly fail = (error: RunError): void => this.terminate(error)

  /** Fails the channel with `error`, unless the run's terminal event came first. */
  private readonly stop = (error: RunError): void => {
    if (this.state !== "open") return
    this.state = "failed"
    this.failedWith = error
    this.ready()
  }

  /**
   * The run service ended the run early (`terminate`): the channel fails with `error` unless its terminal came.
   * A waiting reader is woken as usual; one that is not waiting (held up by its own output: a client that stopped
   * reading) is told through `onTerminated`, so that its response is ended too.
   */
  readonly halt = (error: RunError): void => {
    const heldUp = this.wake === undefined
    this.stop(error)
    const f = this.onHalt
    this.onHalt = undefined
    if (heldUp) f?.(error)
  }

  /** Calls `f` once if the run service ends the run early while the reader is not waiting for it. */
  readonly onTerminated = (f: (error: RunError) => void): void => {
    this.onHalt = f
  }

  /** The error that ended the run other than by its terminal event, if one did. */
  get failure(): RunError | undefined {
    return this.failedWith
  }

  /** Whether the run's events ended (its terminal event arrived, or it failed). */
  get ended(): boolean {
    return this.state !== "open"
  }

  /**
   * Whether the reader is waiting for the run (it asked to be called back), rather than held up by its own
   * output: when the run makes no progress, the upstream is the one that went silent.
   */
  get readerWaiting(): boolean {
    return this.wake !== undefined
  }

  /** The producer waits for the reader: called once the reader took what was there. */
  readonly onReady = (resume: () => void): void => {
    this.resume = resume
  }

  /** What is there to read now; `undefined` while nothing arrived (then `whenReady` says when). */
  readonly read = (): RunRead | undefined => {
    if (this.buffer.length > 0) {
      const events = this.buffer
      this.buffer = []
      this.lastProgressAt = this.now()
      this.pulled()
      return { _tag: "Events", events, done: this.state === "done" }
    }
    switch (this.state) {
      case "open":
        return undefined
      case "done":
        return { _tag: "Events", events: NOTHING, done: true }
      case "failed":
        if (this.reported || this.failedWith === undefined) return { _tag: "Events", events: NOTHING, done: true }
        this.reported = true
        return { _tag: "Failed", error: this.failedWith }
    }
  }

  /** Calls `wake` once, when `when` holds (at once if it does now); a later call replaces an earlier one. */
  readonly whenReady = (wake: () => void, when: ReadyWhen = "readable"): void => {
    if (this.holds(when)) {
      this.wake = undefined
      wake()
    } else {
      this.wake = wake
      this.wakeWhen = when
    }
  }

  /** Forgets the reader's callback (it left). */
  readonly unwatch = (): void => {
    this.wake = undefined
  }

  private holds(when: ReadyWhen): boolean {
    if (this.state !== "open") return true
    switch (when) {
      case "readable":
        return this.buffer.length > 0
      case "settled":
        return this.buffer.length >= HIGH_WATER_EVENTS
      case "started":
        return this.accepted || this.buffer.length > 0
    }
  }

  private ready(): void {
    const wake = this.wake
    if (wake === undefined || !this.holds(this.wakeWhen)) return
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
