import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import * as Scope from "effect/Scope"

/**
 * Runs `release` when the current scope closes. The hot path's way to add a
 * finalizer: `Effect.addFinalizer` / `acquireRelease` diff and patch every
 * FiberRef (the whole Context included) twice per finalizer so that it runs
 * with the acquirer's FiberRefs — measured at ~9 % of the edge's CPU with a
 * dozen finalizers per request. `release` here runs with the closing fiber's.
 */
export const onClose = (release: Effect.Effect<void>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizer(scope, release))

/**
 * `onClose` for a finalizer that logs: it logs at the registering fiber's minimum level and with its annotations
 * (as they are when the scope closes), whichever fiber closes the scope. The request's own fiber usually does
 * (nothing added then); behind a web handler the one that finishes the response body does, whose level is the
 * host app's: the release then runs with the request fiber's two FiberRefs.
 */
export const onCloseLogged = (release: Effect.Effect<void>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.withFiberRuntime((registering) => {
    const scope = Context.unsafeGet(registering.currentContext, Scope.Scope)
    return Scope.addFinalizer(scope, Effect.withFiberRuntime((closing) =>
      closing === registering
        ? release
        : release.pipe(
          Effect.locally(FiberRef.currentMinimumLogLevel, registering.getFiberRef(FiberRef.currentMinimumLogLevel)),
          Effect.locally(FiberRef.currentLogAnnotations, registering.getFiberRef(FiberRef.currentLogAnnotations))
        )
    ))
  })

/** `onClose` for a plain callback. */
export const onCloseSync = (release: () => void): Effect.Effect<void, never, Scope.Scope> => onClose(Effect.sync(release))

/**
 * Adds log annotations for the rest of the current fiber, without restoring
 * them (`annotateLogsScoped` would add a finalizer). For a request's own
 * fiber, which ends with the request: its finalizers (the run's summary line,
 * the access log) still carry them.
 */
export const annotateFiberLogs = (values: Record<string, unknown>): Effect.Effect<void> =>
  FiberRef.update(FiberRef.currentLogAnnotations, (annotations) => {
    let next = annotations
    for (const [key, value] of Object.entries(values)) next = HashMap.set(next, key, value)
    return next
  })
