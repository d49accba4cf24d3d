import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { BoundedCache, type CacheLimits } from "./boundedCache.js"
import { decode, encode, ResponseStore, ResponseStoreError } from "./ResponseStore.js"

/**
 * The response store in this process (`responses.store.kind: "memory"`, the default): records kept as their JSON
 * in UTF-8 bytes (their size is what is bounded, and nothing a caller holds can change one), by the `Clock` (a
 * test's `TestClock` moves their expiry). Bytes, not strings: an encoded record's buffer lives outside the JS heap,
 * so a full store (up to `maxBytes`) is nothing the garbage collector copies or marks. As strings, a store filling
 * at burst load cost every Responses request ~0.3 ms more of the collector's time (`npm run bench`, dialects).
 * Each record has a buffer of its own (`TextEncoder`), not a slice of a pooled one, which would keep its
 * neighbours' memory past their eviction.
 */

const utf8 = new TextEncoder()
const fromUtf8 = new TextDecoder()

export type Options = CacheLimits

export const make = (options: Options): Effect.Effect<ResponseStore.Service> =>
  Effect.map(Effect.clock, (clock) => {
    const cache = new BoundedCache<Uint8Array>(options)
    return {
      enabled: true,
      get: (id) =>
        Effect.suspend(() => {
          const bytes = cache.get(id, clock.unsafeCurrentTimeMillis())
          return bytes === undefined ? Effect.succeed(Option.none()) : Effect.map(decode(fromUtf8.decode(bytes)), Option.some)
        }),
      put: (id, record) =>
        Effect.suspend(() => {
          const bytes = utf8.encode(encode(record))
          return cache.set(id, bytes, clock.unsafeCurrentTimeMillis())
            ? Effect.void
            : Effect.fail(new ResponseStoreError({
              operation: "write",
              reason: `the response (${bytes.length} bytes) is larger than responses.store.maxBytes (${options.maxBytes})`
            }))
        }),
      delete: (id) => Effect.sync(() => void cache.delete(id))
    } satisfies ResponseStore.Service
  })

export const layer = (options: Options): Layer.Layer<ResponseStore> => Layer.effect(ResponseStore, make(options))
