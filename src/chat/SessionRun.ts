import { coalesce } from "./coalesce.js"
import * as Effect from "effect/Effect"
import type { RunError } from "../protocol/errors.js"
import type { ReadyWhen, RunRead } from "../run/RunChannel.js"
import { awaitReady, type RunDispatch, type RunHandle } from "../run/RunHandle.js"
import { type RunOutcomeError, RunFailed, RunTimedOut } from "./errors.js"
import type { FoldTiming } from "./runReport.js"
import * as Session from "./session.js"

/**
 * A run seen through its session: the run's reads folded by the pure session into emissions, by one reader
 * protocol — `poll` what arrived, `whenReady` to be called back — whoever writes the response (a body written from
 * callbacks, a collecting reader, a typed caller). `next` and `opening` are Effect views of the same protocol.
 */
export interface ChatRun {
  readonly dispatch: RunDispatch
  /**
   * The emissions of everything that arrived since the last poll; `"pending"` while nothing has (`whenReady`
   * calls back once something did); `"ended"` after the batch with the terminal emission.
   */
  readonly poll: () => ReadonlyArray<Session.Emission> | "pending" | "ended"
  /** Calls `wake` once, when `when` holds (default: something to poll). */
  readonly whenReady: (wake: () => void, when?: ReadyWhen) => void
  /** Forgets the callback given to `whenReady`. */
  readonly unwatch: () => void
  /** Calls `f` once if the run plane ends the run early while the reader is not waiting (held up by its output). */
  readonly onTerminated: (f: () => void) => void
  /** The next batch of emissions, waiting while nothing arrived; `undefined` after the terminal. */
  readonly next: Effect.Effect<ReadonlyArray<Session.Emission> | undefined>
  /**
   * Waits until the run started (the upstream accepted it) or produced something: what arrived by then, maybe
   * nothing; `undefined` if the run already ended.
   */
  readonly opening: Effect.Effect<ReadonlyArray<Session.Emission> | undefined>
  /** The session as it stands (its terminal and summary once `Closed`). */
  readonly session: () => Session.Session
}

/** How the run plane's endings read to the caller. */
export const runOutcome = (e: RunError): RunOutcomeError => {
  switch (e._tag) {
    case "RunIdle":
      return new RunTimedOut({ bound: "idle", ms: e.idleMs })
    case "RunDeadline":
      return new RunTimedOut({ bound: e.bound, ms: e.ms })
    case "NodeDisconnected":
    case "StreamClosed":
    case "RunCancelled":
    case "WriteStalled":
      return new RunFailed({ reason: e.message, cause: e })
  }
}

/** Trace mode's notes (`runTrace.ts`): what each input emitted, logged after each read. */
export interface RunTrace {
  readonly step: (input: Session.SessionInput, out: ReadonlyArray<Session.Emission>) => void
  /** Logs the lines noted since the last flush. */
  readonly flush: Effect.Effect<void>
}

export interface SessionRunOptions {
  readonly handle: RunHandle
  readonly config: Session.SessionConfig
  readonly folds: FoldTiming
  /** Trace mode: every input and emission noted, flushed after each read by `flush`. */
  readonly trace?: { readonly trace: RunTrace; readonly flush: (lines: Effect.Effect<void>) => void }
}

export const makeChatRun = (options: SessionRunOptions): ChatRun => {
  const { handle, folds } = options
  const trace = options.trace
  let session = Session.initial(options.config)

  const fold = (inputs: Iterable<Session.SessionInput>, arrivedAt: number): ReadonlyArray<Session.Emission> => {
    const out: Array<Session.Emission> = []
    for (const input of inputs) {
      const [next, emitted] = Session.step(session, input)
      session = next
      trace?.trace.step(input, emitted)
      for (const e of emitted) out.push(e)
    }
    folds.processingMs += performance.now() - arrivedAt
    return out
  }

  // The channel is the run's one terminator: a read that is `done` ends with the terminal event, which closes the
  // session. Trace mode logs every delta as it came; otherwise what arrived together is folded as one text.
  const foldRead = (read: RunRead): ReadonlyArray<Session.Emission> => {
    const arrivedAt = performance.now()
    if (read._tag === "Failed") return fold([Session.outcome(runOutcome(read.error))], arrivedAt)
    return fold(trace === undefined ? coalesce(read.events) : read.events, arrivedAt)
  }

  const poll = (): ReadonlyArray<Session.Emission> | "pending" | "ended" => {
    if (session._tag === "Closed") return "ended"
    const read = handle.read()
    if (read === undefined) return "pending"
    const out = foldRead(read)
    if (trace !== undefined) trace.flush(trace.trace.flush)
    return out
  }

  /** Polls until something comes, waiting for `when` between polls. */
  const pollWhen = (when: ReadyWhen): Effect.Effect<ReadonlyArray<Session.Emission> | undefined> =>
    Effect.suspend(() => {
      const out = poll()
      if (out === "ended") return Effect.succeed(undefined)
      if (out !== "pending") return Effect.succeed(out)
      if (when === "started" && handle.accepted()) return Effect.succeed([])
      return Effect.zipRight(awaitReady(handle, when), pollWhen(when))
    })

  return {
    dispatch: handle.dispatch,
    poll,
    whenReady: handle.whenReady,
    unwatch: handle.unwatch,
    onTerminated: (f) => handle.onTerminated(() => f()),
    next: pollWhen("readable"),
    opening: pollWhen("started"),
    session: () => session
  }
}
