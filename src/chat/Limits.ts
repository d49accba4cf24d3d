import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import { EdgeConfig } from "../config/EdgeConfig.js"
import type { KeyPolicy } from "./KeyPolicy.js"
import { RateLimited } from "./EdgeError.js"
import { onClose } from "../common/onClose.js"

interface Counts {
  readonly total: number
  readonly perKey: ReadonlyMap<string, number>
}

export declare namespace Limits {
  export interface Service {
    /** Takes a run slot (global, and the key's) until the scope closes, or fails with 429 at once. */
    readonly acquire: (key: KeyPolicy | undefined) => Effect.Effect<void, RateLimited, Scope.Scope>
  }
}

/** Concurrent-run limits: `runs.maxConcurrentRuns` for the edge, `maxConcurrentRuns` per API key. */
export class Limits extends Context.Tag("@iop/edge/Limits")<Limits, Limits.Service>() {}

export const make = (options: { readonly maxConcurrentRuns?: number | undefined }) => Effect.gen(function* () {
  const global = options.maxConcurrentRuns ?? Number.POSITIVE_INFINITY
  const counts = yield* Ref.make<Counts>({ total: 0, perKey: new Map() })

  const take = (key: KeyPolicy | undefined) =>
    Ref.modify(counts, (c): readonly [RateLimited | undefined, Counts] => {
      if (c.total >= global) return [new RateLimited({ scope: "edge", limit: global }), c]
      const mine = key === undefined ? 0 : c.perKey.get(key.id) ?? 0
      if (key?.maxConcurrentRuns !== undefined && mine >= key.maxConcurrentRuns) {
        return [new RateLimited({ scope: "key", limit: key.maxConcurrentRuns }), c]
      }
      const perKey = key === undefined ? c.perKey : new Map(c.perKey).set(key.id, mine + 1)
      return [undefined, { total: c.total + 1, perKey }]
    })

  const give = (key: KeyPolicy | undefined) =>
    Ref.update(counts, (c) => {
      if (key === undefined) return { ...c, total: c.total - 1 }
      const perKey = new Map(c.perKey)
      const mine = (perKey.get(key.id) ?? 1) - 1
      if (mine <= 0) perKey.delete(key.id)
      else perKey.set(key.id, mine)
      return { total: c.total - 1, perKey }
    })

  return {
    acquire: (key) =>
      take(key).pipe(
        Effect.flatMap((refused) => (refused === undefined ? onClose(give(key)) : Effect.fail(refused)))
      )
  } satisfies Limits.Service
})

/** The limits for `maxConcurrentRuns` runs at once across all callers (default: unlimited). */
export const layer = (options: { readonly maxConcurrentRuns?: number | undefined }): Layer.Layer<Limits> =>
  Layer.effect(Limits, make(options))

/** The config's `runs.maxConcurrentRuns`. */
export const layerFromConfig: Layer.Layer<Limits, never, EdgeConfig> = Layer.unwrapEffect(
  Effect.map(EdgeConfig, (config) => layer({ maxConcurrentRuns: config.runs.maxConcurrentRuns }))
)
