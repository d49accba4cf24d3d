import type { RunError } from "./errors.js"
import type { RunEvent } from "./RunEvent.js"

/**
 * Where a run's events go. Whatever produces them (a provider's body reader,
 * a bus subscription) writes here from its own callbacks, one batch per read:
 * no fiber hop, no per-event Effect. Nothing here ever blocks or waits for
 * the reader, so cancellation and shutdown never wait on a client.
 */
export interface RunSink {
  /**
   * One read's events, in order. Returns `false` when the reader has fallen
   * behind: a producer that can pause (an upstream body) pauses and resumes
   * when `onReady` calls back. Events after the run ended are dropped.
   */
  readonly emit: (events: ReadonlyArray<RunEvent>) => boolean
  /**
   * The upstream accepted the run (answered 200; over the bus, the node's provider did): the caller's response may
   * start before the first event. Optional to call: the first `emit` implies it. A run that fails before it (an
   * upstream 4xx, unreachable) is answered with an HTTP status; after it, with the API's stream error event.
   */
  readonly accept: () => void
  /**
   * `true`: the producer waits on a whole answer (an upstream asked for JSON, not a stream): nothing arrives until
   * its end, so the run's idle bound does not apply until then; the whole-answer bound does. `false`: it does not
   * any more (the upstream streams after all). The first `emit` ends the wait too. Optional to implement and call:
   * a producer that streams never calls it.
   */
  readonly awaitWhole?: (waiting: boolean) => void
  /**
   * The upstream produced output that has no event yet: a native tool call's name and arguments, which arrive whole
   * with the run's `Complete`. Progress for the idle bound, and the answer's start for the first-token bound.
   * Optional to implement and call (a producer without such output never calls it).
   */
  readonly progress?: () => void
  /**
   * The producer has nothing more. The run's channel is the one terminator: it accepts nothing after the first
   * terminal event, so a producer never slices at one, and an end without a terminal is `StreamClosed`.
   */
  readonly end: () => void
  /** The transport failed (node gone, subscription lost): the run ends with this error. */
  readonly fail: (error: RunError) => void
  /** Calls `resume` once, when the reader has caught up after `emit` returned `false`. */
  readonly onReady: (resume: () => void) => void
}
