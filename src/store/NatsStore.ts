import { type KV, Kvm } from "@nats-io/kv"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { clip } from "../common/clip.js"
import { BusConnectFailed, type NatsConfig } from "../node/nats/BusConfig.js"
import * as NatsBus from "../node/nats/NatsBus.js"
import { decode, encode, ResponseStore, ResponseStoreError } from "./ResponseStore.js"

/**
 * The response store on NATS JetStream key-value (`responses.store.kind: "nats"`): one bucket every edge that
 * names it shares, so a conversation started on one edge continues on another. One key per response (its id); the
 * bucket's `max_age` is the TTL (servers before 2.11 have no per-key TTL) and its history is 1. Only `iop-edge/nats`
 * loads it (the root import never loads the NATS client). Its own connection, with the bus's settings by default.
 */

export interface Options {
  readonly nats: NatsConfig
  readonly bucket: string
  readonly ttlMs: number
}

/** The longest one read or write may take before it is a store failure (the client's own default is 20 s). */
const OPERATION_TIMEOUT = Duration.seconds(5)

/** What the key-value API accepts as a key; a response id the edge makes always is one. */
const KEY = /^[-/_=.a-zA-Z0-9]+$/

const reasonOf = (e: unknown): string => clip(e instanceof Error ? e.message : String(e), 200)

export const make = (options: Options): Effect.Effect<ResponseStore.Service, BusConnectFailed, Scope.Scope> =>
  Effect.gen(function* () {
    const connection = yield* NatsBus.make({ nats: options.nats }, { name: "iop-edge response store" })
    // Opened once at start: a bucket that cannot be created or reached stops the edge, as an unreachable bus does.
    const kv: KV = yield* Effect.tryPromise({
      try: () => new Kvm(connection.client).create(options.bucket, { history: 1, ttl: options.ttlMs }),
      catch: (e) =>
        new BusConnectFailed({
          servers: options.nats.servers.join(", "),
          reason: `cannot open the key-value bucket '${options.bucket}' (is JetStream enabled: nats-server -js?): ${reasonOf(e)}`
        })
    })
    const call = <A>(operation: ResponseStoreError["operation"], f: () => Promise<A>) =>
      Effect.tryPromise({ try: f, catch: (e) => new ResponseStoreError({ operation, reason: reasonOf(e) }) }).pipe(
        Effect.timeoutFail({
          duration: OPERATION_TIMEOUT,
          onTimeout: () => new ResponseStoreError({ operation, reason: "no answer from NATS in 5 s" })
        })
      )
    return {
      enabled: true,
      get: (id) =>
        KEY.test(id)
          ? Effect.flatMap(call("read", () => kv.get(id)), (entry) =>
            entry === null || entry.operation !== "PUT"
              ? Effect.succeed(Option.none())
              : Effect.try({
                try: () => entry.string(),
                catch: () => new ResponseStoreError({ operation: "read", reason: "a stored value is not text" })
              }).pipe(Effect.flatMap(decode), Effect.map(Option.some)))
          : Effect.succeed(Option.none()),
      put: (id, record) => Effect.asVoid(call("write", () => kv.put(id, encode(record)))),
      delete: (id) => (KEY.test(id) ? call("delete", () => kv.delete(id)) : Effect.void)
    } satisfies ResponseStore.Service
  })

export const layer = (options: Options): Layer.Layer<ResponseStore, BusConnectFailed> =>
  Layer.scoped(ResponseStore, make(options))
