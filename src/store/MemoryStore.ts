import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { BoundedCache, type CacheLimits } from "./boundedCache.js"
import { decode, encode, ResponseStore, ResponseStoreError } from "./ResponseStore.js"

/**
 * The response store in this process (`responses.store.kind: "memory"`, the default): records kept as their JSON
 * text (their size is what is bounded, and nothing a caller holds can change one), by the `Clock` (a test's
 * `TestClock` moves their expiry).
 */

export type Options = CacheLimits

export const make = (options: Options): Effect.Effect<ResponseStore.Service> =>
  Effect.map(Effect.clock, (clock) => {
    const cache = new BoundedCache(options)
    return {
      enabled: true,
      get: (id) =>
        Effect.suspend(() => {
          const text = cache.get(id, clock.unsafeCurrentTimeMillis())
          return text === undefined ? Effect.succeed(Option.none()) : Effect.map(decode(text), Option.some)
        }),
      put: (id, record) =>
        Effect.suspend(() => {
          const text = encode(record)
          return cache.set(id, text, clock.unsafeCurrentTimeMillis())
            ? Effect.void
            : Effect.fail(new ResponseStoreError({
              operation: "write",
              reason: `the response (${text.length} bytes) is larger than responses.store.maxBytes (${options.maxBytes})`
            }))
        }),
      delete: (id) => Effect.sync(() => void cache.delete(id))
    } satisfies ResponseStore.Service
  })

export const layer = (options: Options): Layer.Layer<ResponseStore> => Layer.effect(ResponseStore, make(options))
