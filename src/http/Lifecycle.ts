import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { onClose } from "../common/onClose.js"

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

export const make = Effect.gen(function* () {
  const state = yield* Ref.make<"serving" | "draining">("serving")
  const open = yield* SubscriptionRef.make(0)
  return {
    serving: Ref.get(state).pipe(Effect.map((s) => s === "serving")),
    draining: Ref.get(state).pipe(Effect.map((s) => s === "draining")),
    startDraining: Ref.set(state, "draining"),
    // A request that arrives while draining is not counted: a stream of them must not hold the drain open.
    track: Ref.get(state).pipe(
      Effect.flatMap((s) =>
        s === "draining"
          ? Effect.succeed(false)
          : SubscriptionRef.update(open, (n) => n + 1).pipe(
            Effect.zipRight(onClose(SubscriptionRef.update(open, (n) => n - 1))),
            Effect.as(true)
          )
      )
    ),
    open: SubscriptionRef.get(open),
    awaitIdle: (timeout) =>
      open.changes.pipe(
        Stream.takeUntil((n) => n === 0),
        Stream.runDrain,
        Effect.timeoutOption(timeout),
        Effect.map(Option.isSome)
      )
  } satisfies Lifecycle.Service
})

export const LifecycleLive: Layer.Layer<Lifecycle> = Layer.effect(Lifecycle, make)
