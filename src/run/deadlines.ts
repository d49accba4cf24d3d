import { type RunError, RunDeadline, RunIdle, WriteStalled } from "../protocol/errors.js"
import type { ModelRunsConfig } from "../protocol/ModelOptions.js"

/**
 * When a run is due, and what ended it: pure, over what the run's channel says of it. The run watchdog reads
 * `dueAt` once per round per run (never per event) and `expiry` once, when the run is due.
 */

/** A run's bounds beside the idle one, in ms; undefined: none. */
export interface RunBounds {
  readonly firstTokenMs: number | undefined
  readonly maxRunMs: number | undefined
}

/** The idle bounds every run has: `runs.idleTimeoutMs`, and `runs.wholeAnswerTimeoutMs` while it awaits a whole answer. */
export interface IdleBounds {
  readonly idleMs: number
  readonly wholeMs: number
}

/** What the watchdog reads of a run (its `RunChannel`). */
export interface RunProgress {
  readonly lastProgressAt: number
  readonly wholeSince: number | undefined
  readonly answering: boolean
  readonly ended: boolean
  readonly readerWaiting: boolean
}

/** The model's own bounds over the edge's: a number replaces the edge's, `null` removes it, absent keeps it. */
export const boundsFor = (edge: RunBounds, model: ModelRunsConfig | undefined): RunBounds => {
  if (model === undefined) return edge
  const pick = (own: number | null | undefined, fallback: number | undefined) =>
    own === undefined ? fallback : own ?? undefined
  return {
    firstTokenMs: pick(model.firstTokenTimeoutMs, edge.firstTokenMs),
    maxRunMs: pick(model.maxRunMs, edge.maxRunMs)
  }
}

/**
 * A run's own bounds as they are fixed when it starts (at `startedAt`): each a deadline, or infinity. The
 * first-token bound does not apply to a request for a whole answer: its upstream sends nothing before its end, so
 * no first token can be seen (`wholeAnswerTimeoutMs` and `maxRunMs` bound it).
 */
export interface RunDeadlines {
  readonly startedAt: number
  readonly firstTokenAt: number
  readonly maxRunAt: number
}

export const deadlinesOf = (startedAt: number, bounds: RunBounds, wholeAnswer: boolean): RunDeadlines => ({
  startedAt,
  firstTokenAt: bounds.firstTokenMs === undefined || wholeAnswer ? Infinity : startedAt + bounds.firstTokenMs,
  maxRunAt: bounds.maxRunMs === undefined ? Infinity : startedAt + bounds.maxRunMs
})

const idleDue = (run: RunProgress, idle: IdleBounds): number =>
  run.wholeSince === undefined ? run.lastProgressAt + idle.idleMs : run.wholeSince + idle.wholeMs

/**
 * When the run is due: its idle deadline (last progress plus the idle bound, or the whole answer's), and until its
 * events ended, its run deadline and, until its answer began, its first-token one.
 */
export const dueAt = (run: RunProgress, idle: IdleBounds, own: RunDeadlines): number => {
  const due = idleDue(run, idle)
  if (run.ended) return due
  return Math.min(due, own.maxRunAt, run.answering ? Infinity : own.firstTokenAt)
}

/** Why a run that is due ends: the bound that passed first. */
export const expiry = (run: RunProgress, idle: IdleBounds, own: RunDeadlines): RunError => {
  const due = idleDue(run, idle)
  if (!run.ended) {
    const firstToken = run.answering ? Infinity : own.firstTokenAt
    if (own.maxRunAt <= due && own.maxRunAt <= firstToken) {
      return new RunDeadline({ bound: "max_run", ms: own.maxRunAt - own.startedAt })
    }
    if (firstToken <= due) return new RunDeadline({ bound: "first_token", ms: firstToken - own.startedAt })
  }
  // No progress: whose fault is it, the upstream's or the reader's?
  return run.wholeSince !== undefined
    ? new RunIdle({ idleMs: idle.wholeMs })
    : run.readerWaiting && !run.ended
    ? new RunIdle({ idleMs: idle.idleMs })
    : new WriteStalled({ idleMs: idle.idleMs })
}
