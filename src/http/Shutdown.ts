import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import { EdgeConfig } from "../config/EdgeConfig.js"
import * as Logging from "../observability/Logging.js"
import { RunService } from "../run/RunService.js"
import { Lifecycle } from "./Lifecycle.js"

/** What shutdown may take after `server.shutdownGraceMs` when callers remain: the contract's bound is one second. */
export const AFTER_GRACE_MS = 800

/**
 * The edge's drain, run once however the edge is served: refuse new requests (503), let open ones finish within
 * `server.shutdownGraceMs`, then cancel every run left so each caller gets its terminal event. It runs when the
 * edge's services close (so an app that mounts the routes on its own server shuts down in bounded time with no
 * layer to add), or earlier when the edge's serving layer starts it before closing its listener.
 */
export declare namespace Shutdown {
  export interface Service {
    /** Drains (once; later calls wait for the same drain) and returns the time (Clock ms) the shutdown should end by. */
    readonly drain: Effect.Effect<number>
  }
}

export class Shutdown extends Context.Tag("@iop/edge/Shutdown")<Shutdown, Shutdown.Service>() {}

// A finalizer runs uninterruptibly, where no timeout could fire: each wait runs in a fiber of its own, made
// interruptible so that its timeout can win.
const detached = <A>(effect: Effect.Effect<A>): Effect.Effect<A> =>
  Effect.forkDaemon(Effect.interruptible(effect)).pipe(Effect.flatMap(Fiber.join))

const drainOnce = Effect.gen(function* () {
  const lifecycle = yield* Lifecycle
  const runs = yield* RunService
  const config = yield* EdgeConfig
  yield* lifecycle.startDraining
  const open = yield* lifecycle.open
  yield* Effect.logInfo("draining").pipe(Effect.annotateLogs({ open_requests: open }))
  const drained = yield* detached(lifecycle.awaitIdle(config.server.shutdownGraceMs))
  // After the grace period, one second in all: cancel every run at once and give callers what is left of it to
  // read their error.
  const deadline = (yield* Clock.currentTimeMillis) + (drained ? 1_000 : AFTER_GRACE_MS)
  if (!drained) {
    yield* Effect.logWarning("grace period over: cancelling open runs")
    yield* runs.cancelAll("edge shutting down", AFTER_GRACE_MS / 2)
    const left = Math.max(0, deadline - (yield* Clock.currentTimeMillis))
    yield* detached(lifecycle.awaitIdle(Math.min(AFTER_GRACE_MS / 2, left)))
  }
  return deadline
})

export const layer: Layer.Layer<Shutdown, never, Lifecycle | RunService | EdgeConfig> = Layer.scoped(
  Shutdown,
  Effect.gen(function* () {
    const context = yield* Effect.context<Lifecycle | RunService | EdgeConfig>()
    // Logged at the config's level, whoever closes the services (an app's own level may be lower).
    const level = Logging.levels[Context.get(context, EdgeConfig).log.level]
    const drain = yield* Effect.cached(Effect.provide(drainOnce, context).pipe(Logger.withMinimumLogLevel(level)))
    yield* Effect.addFinalizer(() => drain)
    return { drain }
  })
)
