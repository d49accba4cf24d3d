import * as Exit from "effect/Exit"
import * as Mailbox from "effect/Mailbox"
import * as Option from "effect/Option"
import type { RunError } from "./errors.js"
import type { RunEvent } from "./RunEvent.js"
import type { RunSink } from "./RunSink.js"

/** Events a run may hold unread before its producer is asked to pause. */
export const HIGH_WATER_EVENTS = 512

/**
 * One run's events in one place: the sink every writer uses (the provider
 * or bus subscription, node loss, the idle watchdog, cancellation), over one
 * unbounded mailbox the response reads. Writing never blocks; a reader that
 * falls behind pauses the producer instead (`emit` returns false).
 */
export class RunChannel implements RunSink {
  /** When the last batch arrived, by the run plane's clock (read by the idle watchdog). */
  lastEventAt: number
  private open = true
  private resume: (() => void) | undefined = undefined

  constructor(
    readonly mailbox: Mailbox.Mailbox<RunEvent, RunError>,
    private readonly now: () => number
  ) {
    this.lastEventAt = now()
  }

  readonly emit = (events: ReadonlyArray<RunEvent>): boolean => {
    if (!this.open) return true
    this.lastEventAt = this.now()
    this.mailbox.unsafeOfferAll(events)
    return Option.getOrElse(this.mailbox.unsafeSize(), () => 0) < HIGH_WATER_EVENTS
  }

  readonly end = (): void => {
    if (!this.open) return
    this.open = false
    this.mailbox.unsafeDone(Exit.void)
  }

  readonly fail = (error: RunError): void => {
    if (!this.open) return
    this.open = false
    this.mailbox.unsafeDone(Exit.fail(error))
  }

  readonly onReady = (resume: () => void): void => {
    this.resume = resume
  }

  /** The reader took what was there: a paused producer may go on. */
  readonly pulled = (): void => {
    const resume = this.resume
    if (resume === undefined) return
    this.resume = undefined
    resume()
  }
}
