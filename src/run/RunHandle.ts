import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type { RunError } from "../protocol/errors.js"
import type { ReadyWhen, RunChannel, RunRead, TokenTiming } from "./RunChannel.js"
import type { NodeId, RunEvent, RunId } from "../protocol/RunEvent.js"
import type { RouteDecision } from "./NodeRegistry.js"

export interface RunDispatch {
  readonly runId: RunId
  /** The node that took the run (after any failover). */
  readonly nodeId: NodeId
  readonly model: string
  /** Why it went to that node (absent for a run that was not routed: a test kit's). */
  readonly route?: RouteDecision
  /** Which node it is on, counting those that refused or failed it before it was accepted (1: the first). */
  readonly nodeAttempt?: number
}

/**
 * A started run, read through one protocol: `read` what arrived, and `whenReady` to be called back when there is
 * something (or the run was accepted, or it settled). `take` and `events` are Effect and Stream views of the same
 * reads, for callers that want them. Closing the scope `submit` ran in cancels the run on its node.
 */
export interface RunHandle {
  readonly dispatch: RunDispatch
  /**
   * Everything that arrived since the last read, and whether the events ended; or the outcome that ended the run
   * other than by its own events (node lost, idle timeout, client stopped reading, cancelled, a stream that closed
   * without its terminal event). `undefined` while nothing arrived.
   */
  readonly read: () => RunRead | undefined
  /** Calls `wake` once, when `when` holds (default: something to read). */
  readonly whenReady: (wake: () => void, when?: ReadyWhen) => void
  /** Forgets the callback given to `whenReady` (the reader left). */
  readonly unwatch: () => void
  /** Calls `f` once if the run plane ends the run early while the reader is not waiting (held up by its output). */
  readonly onTerminated: (f: (error: RunError) => void) => void
  /** Whether the upstream accepted the run (it answered; or an event arrived). */
  readonly accepted: () => boolean
  /** When the run's text arrived (stamped on arrival, however late it is read). */
  readonly timing: TokenTiming
  /** `read` as an Effect that waits while nothing arrived. */
  readonly take: Effect.Effect<RunRead>
  /** The same events as a Stream: ends with the run's events, fails with its outcome. */
  readonly events: Stream.Stream<RunEvent, RunError>
}

const NOTHING: RunRead = { _tag: "Events", events: [], done: false }

/** Waits, by the channel's callback, until `when` holds; interrupted, the callback is forgotten. */
export const awaitReady = (
  reader: Pick<RunHandle, "whenReady" | "unwatch">,
  when: ReadyWhen
): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    reader.whenReady(() => resume(Effect.void), when)
    return Effect.sync(reader.unwatch)
  })

/** A started run's handle over its channel. */
export const handleOf = (dispatch: RunDispatch, channel: RunChannel): RunHandle => {
  const take: Effect.Effect<RunRead> = Effect.suspend(() => {
    const now = channel.read()
    if (now !== undefined) return Effect.succeed(now)
    return Effect.map(awaitReady(channel, "readable"), () => channel.read() ?? NOTHING)
  })
  const events: Stream.Stream<RunEvent, RunError> = Stream.repeatEffectChunkOption(
    Effect.flatMap(take, (r): Effect.Effect<Chunk.Chunk<RunEvent>, Option.Option<RunError>> => {
      if (r._tag === "Failed") return Effect.fail(Option.some(r.error))
      if (r.done && r.events.length === 0) return Effect.fail(Option.none())
      return Effect.succeed(Chunk.unsafeFromArray(r.events.slice()))
    })
  )
  return {
    dispatch,
    read: channel.read,
    whenReady: channel.whenReady,
    unwatch: channel.unwatch,
    onTerminated: channel.onTerminated,
    accepted: () => channel.accepted,
    timing: channel.timing,
    take,
    events
  }
}
