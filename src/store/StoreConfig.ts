import * as Schema from "effect/Schema"
import { NatsConfig } from "../node/nats/BusConfig.js"

/**
 * The `responses` config section: where the Responses API's stored responses are kept. Schemas only (no NATS
 * client), so that the config module can include them without loading a backend.
 */

const PositiveInt = Schema.Int.pipe(Schema.positive())

/** How long a stored response is kept by default: a day. */
const DEFAULT_TTL_MS = 86_400_000

/** In this process: bounded by count and size (least recently used first out), each kept `ttlMs` from its store. */
export const MemoryStoreConfig = Schema.Struct({
  kind: Schema.Literal("memory"),
  maxResponses: Schema.optionalWith(PositiveInt, { default: () => 10_000 }),
  /** The stored JSON's total size in UTF-8 bytes at most (default 128 MiB). */
  maxBytes: Schema.optionalWith(PositiveInt, { default: () => 128 * 1024 * 1024 }),
  ttlMs: Schema.optionalWith(PositiveInt, { default: () => DEFAULT_TTL_MS })
})
export type MemoryStoreConfig = typeof MemoryStoreConfig.Type

/** A JetStream key-value bucket name. */
const BucketName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_-]{1,64}$/, { message: () => "letters, digits, '_' or '-' (a JetStream key-value bucket)" })
)

/** A NATS JetStream key-value bucket, shared by every edge that names it (`nats-server -js`). */
export const NatsStoreConfig = Schema.Struct({
  kind: Schema.Literal("nats"),
  bucket: Schema.optionalWith(BucketName, { default: () => "iop_responses" }),
  /** The bucket's `max_age`, set when the edge creates it (an existing bucket keeps its own). */
  ttlMs: Schema.optionalWith(PositiveInt, { default: () => DEFAULT_TTL_MS }),
  /** Servers and credentials; default: the `bus`'s, else `nats://127.0.0.1:4222`. */
  nats: Schema.optional(NatsConfig)
})
export type NatsStoreConfig = typeof NatsStoreConfig.Type

/** Nothing is stored: `store` is answered false, and references to stored responses are 400s. */
export const NoStoreConfig = Schema.Struct({ kind: Schema.Literal("none") })

export const ResponseStoreConfig = Schema.Union(MemoryStoreConfig, NatsStoreConfig, NoStoreConfig)
export type ResponseStoreConfig = typeof ResponseStoreConfig.Type

export const ResponsesConfig = Schema.Struct({
  store: Schema.optionalWith(ResponseStoreConfig, { default: () => MemoryStoreConfig.make({ kind: "memory" }) })
})
export type ResponsesConfig = typeof ResponsesConfig.Type
