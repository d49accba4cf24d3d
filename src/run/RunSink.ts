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
  /** The producer has nothing more (a run that ends without a terminal event is a broken stream). */
  readonly end: () => void
  /** The transport failed (node gone, subscription lost): the run ends with this error. */
  readonly fail: (error: RunError) => void
  /** Calls `resume` once, when the reader has caught up after `emit` returned `false`. */
  readonly onReady: (resume: () => void) => void
}
