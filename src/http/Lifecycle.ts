import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { onCloseSync } from "../common/onClose.js"

/**
 * Whether the edge takes requests, and how many are open (a stream counts until its body ends). It serves from
 * the start (whoever mounts the routes decides when they are reachable) until shutdown starts the drain.
 */
export declare namespace Lifecycle {
  export interface Service {
    readonly serving: Effect.Effect<boolean>
    readonly draining: Effect.Effect<boolean>
    readonly startDraining: Effect.Effect<void>
    /**
     * Counts a request open until the scope (the request's) closes. Requests that arrive while
     * draining are not counted: they are answered 503 at once, and a steady stream of them must
     * not keep the drain from ending.
     */
    readonly track: Effect.Effect<void, never, Scope.Scope>
    readonly open: Effect.Effect<number>
    /** Waits until no counted request is open, at most `timeout`; true when they all finished. */
    readonly awaitIdle: (timeout: Duration.DurationInput) => Effect.Effect<boolean>
  }
}

export class Lifecycle extends Context.Tag("@iop/edge/Lifecycle")<Lifecycle, Lifecycle.Service>() {}

/**
 * Plain state read and written synchronously: `track` runs on every request, where a `SubscriptionRef` (a
 * semaphore and a PubSub publish per update) cost more than the rest of the middleware. The only waiter is
 * the drain, woken by the request that closes last.
 */
export const make = Effect.sync((): Lifecycle.Service => {
  let draining = false
  let open = 0
  const idleWaiters = new Set<() => void>()
  const release = (): void => {
    open -= 1
    if (open === 0) for (const wake of idleWaiters) wake()
  }
  const closeTracked = onCloseSync(release)
  const untracked = Effect.void
  return {
    serving: Effect.sync(() => !draining),
    draining: Effect.sync(() => draining),
    startDraining: Effect.sync(() => {
      draining = true
    }),
    // A request that arrives while draining is not counted: a stream of them must not hold the drain open.
    track: Effect.suspend(() => {
      if (draining) return untracked
      open += 1
      return closeTracked
    }),
    open: Effect.sync(() => open),
    awaitIdle: (timeout) =>
      Effect.async<void>((resume) => {
        if (open === 0) return resume(Effect.void)
        const wake = () => {
          idleWaiters.delete(wake)
          resume(Effect.void)
        }
        idleWaiters.add(wake)
        return Effect.sync(() => idleWaiters.delete(wake))
      }).pipe(Effect.timeoutOption(timeout), Effect.map(Option.isSome))
  }
})

export const layer: Layer.Layer<Lifecycle> = Layer.effect(Lifecycle, make)
