import * as Duration from "effect/Duration"
import * as RunEvent from "../protocol/RunEvent.js"

/**
 * The steps of a scripted run (`ScriptedProvider.script`): run events, and the provider's own doings between
 * them. Consecutive events are delivered as one batch (one read of an upstream body); a terminal event (`Complete`,
 * `Failed`, `Cancelled`) ends the run and the script with it; a script that runs out without one ends the run without
 * it, which the chat plane answers as a broken stream (`run stream closed`).
 */
export type Step = RunEvent.RunEvent | Sleep | Stall | End

/** Waits, by Effect's `Clock`: under `TestClock` only `TestClock.adjust` moves it on. */
export interface Sleep {
  readonly _tag: "Sleep"
  readonly duration: Duration.Duration
}

/** The provider says nothing more and never ends the run (until the edge closes it: idle timeout, cancellation). */
export interface Stall {
  readonly _tag: "Stall"
}

/** The provider ends the run without a terminal event (the chat plane's broken stream, `run stream closed`). */
export interface End {
  readonly _tag: "End"
}

/** A content delta. */
export const text = (text: string): RunEvent.RunEvent => RunEvent.delta(text)

/** A reasoning delta. */
export const reasoning = (text: string): RunEvent.RunEvent => RunEvent.reasoningDelta(text)

/** The run's terminal `Complete` with `finish_reason: "stop"`, no tool calls, and `usage` when given. */
export const complete = (usage?: RunEvent.Usage): RunEvent.RunEvent =>
  RunEvent.complete(usage === undefined ? { finishReason: "stop", toolCalls: [], metadata: {} } : {
    finishReason: "stop",
    toolCalls: [],
    usage,
    metadata: {}
  })

/** The run's terminal `Failed` event: the provider failed with `reason` (what the client reads as a run error). */
export const fail = (reason: string): RunEvent.RunEvent => RunEvent.failed(reason)

export const sleep = (duration: Duration.DurationInput): Step => ({ _tag: "Sleep", duration: Duration.decode(duration) })

export const stall: Step = { _tag: "Stall" }

export const end: Step = { _tag: "End" }
