import * as Clock from "effect/Clock"
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
 * One idle watchdog for every run of the process: a single fiber that sleeps
 * until the earliest deadline (by `Clock`, so `TestClock` drives it) and
 * parks while nothing is watched. A run only stamps `lastProgressAt` per batch (arrived or read):
 * no timer, race or fiber per run, nothing per event.
 */
export const make = (idleMs: number): Effect.Effect<Watchdog, never, Scope.Scope> =>
  Effect.gen(function* () {
    const watched = new Set<Watched>()
    const anything = yield* Effect.makeLatch(false)

    const round = Effect.gen(function* () {
      yield* anything.await
      const now = yield* Clock.currentTimeMillis
      let earliest = Number.POSITIVE_INFINITY
      for (const w of watched) {
        const due = w.dueAt
        if (due <= now) {
          watched.delete(w)
          w.onIdle()
        } else if (due < earliest) earliest = due
      }
      if (watched.size === 0) return yield* anything.close
      // A deadline is never closer than `idleMs` from when it was set (progress stamps now + idleMs; a whole answer's
      // bound is at least as long), and the fiber never sleeps longer than that: no run is due before it wakes, even
      // one whose whole answer just arrived (its deadline moved from the whole bound back to the idle one).
      yield* Effect.sleep(Math.min(earliest - now, idleMs))
    })
    yield* Effect.forkScoped(Effect.forever(round))

    const watch = (w: Watched) => {
      watched.add(w)
      anything.unsafeOpen()
      return () => {
        watched.delete(w)
      }
    }
    return { watch }
  })
