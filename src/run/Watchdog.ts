import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/** What the watchdog watches: when it is due (its last progress plus its bound), and what to do then. */
export interface Watched {
  readonly dueAt: number
  readonly onIdle: () => void
}

export interface Watchdog {
  /**
   * Watches `w` until the returned function is called (synchronous: the run calls it from its one finalizer);
   * `onIdle` is called (once) when the clock reaches its `dueAt`.
   */
  readonly watch: (w: Watched) => () => void
}

/**
 * One watchdog for every run of the process: a single fiber that sleeps until the earliest deadline (by `Clock`,
 * so `TestClock` drives it) and parks while nothing is watched. A run only stamps `lastProgressAt` per batch
 * (arrived or read): no timer, race or fiber per run, nothing per event.
 *
 * `maxSleepMs`: the longest the fiber sleeps between rounds. A deadline that moves earlier while it sleeps (a
 * whole answer's bound giving way to the idle one) is never closer than this from when it moved. With
 * `wakeEarly`, a deadline that is closer when it starts to be watched (a run's first-token bound shorter than the
 * idle one) wakes the fiber: the round that follows sleeps until it. That costs a race per round (a few Effect
 * steps), so a watchdog whose deadlines are never closer than `maxSleepMs` (a keep-alive's) sleeps plainly.
 */
export const make = (
  maxSleepMs: number,
  options: { readonly wakeEarly?: boolean } = {}
): Effect.Effect<Watchdog, never, Scope.Scope> =>
  Effect.gen(function* () {
    const wakeEarly = options.wakeEarly === true
    const watched = new Set<Watched>()
    const anything = yield* Effect.makeLatch(false)
    /** Opened by `watch` when what it watches is due before the fiber's planned wake. */
    const sooner = yield* Effect.makeLatch(false)
    const clock = yield* Effect.clock
    /**
     * When the sleeping fiber wakes; minus infinity while it does not sleep (parked, or about to scan: what is
     * watched then is in the scan, even from an `onIdle` during it).
     */
    let wakeAt = Number.NEGATIVE_INFINITY

    const round = Effect.gen(function* () {
      yield* anything.await
      if (wakeEarly) yield* sooner.close
      const now = clock.unsafeCurrentTimeMillis()
      let earliest = Number.POSITIVE_INFINITY
      for (const w of watched) {
        const due = w.dueAt
        if (due <= now) {
          watched.delete(w)
          w.onIdle()
        } else if (due < earliest) earliest = due
      }
      if (watched.size === 0) return yield* anything.close
      const sleep = Math.min(earliest - now, maxSleepMs)
      if (!wakeEarly) return yield* Effect.sleep(sleep)
      wakeAt = now + sleep
      yield* Effect.raceFirst(Effect.sleep(sleep), sooner.await)
      wakeAt = Number.NEGATIVE_INFINITY
    })
    yield* Effect.forkScoped(Effect.forever(round))

    const watch = (w: Watched) => {
      watched.add(w)
      anything.unsafeOpen()
      if (w.dueAt < wakeAt) sooner.unsafeOpen()
      return () => {
        watched.delete(w)
      }
    }
    return { watch }
  })
