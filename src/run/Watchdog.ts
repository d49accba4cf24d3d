import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/** What the watchdog watches: when it last made progress, and what to do when it made none for too long. */
export interface Watched {
  readonly lastProgressAt: number
  readonly onIdle: () => void
}

export interface Watchdog {
  /**
   * Watches `w` until the returned function is called (synchronous: the run calls it from its one finalizer);
   * `onIdle` is called (once) when `idleMs` pass without progress.
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
        const due = w.lastProgressAt + idleMs
        if (due <= now) {
          watched.delete(w)
          w.onIdle()
        } else if (due < earliest) earliest = due
      }
      if (watched.size === 0) return yield* anything.close
      // Deadlines only move later (every run has the same idleMs and progress pushes lastProgressAt forward), so a
      // run watched while this fiber sleeps is never due before it wakes.
      yield* Effect.sleep(earliest - now)
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
