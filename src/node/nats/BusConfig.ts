import * as Schema from "effect/Schema"

/**
 * The `bus` and `node` config sections. Schemas only (no NATS client), so
 * that the config module can include them without loading the transport.
 */

const PositiveInt = Schema.Int.pipe(Schema.positive())

/** One NATS subject token: ids end up inside subjects, so no dots, spaces or wildcards. */
export const SubjectToken = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_-]+$/, { message: () => "letters, digits, '_' or '-' (used in NATS subjects)" })
)

/** A subject prefix: one or more tokens joined by dots. */
export const SubjectPrefix = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, { message: () => "NATS subject tokens joined by '.'" })
)

export const NatsTlsConfig = Schema.Struct({
  caFile: Schema.optional(Schema.String),
  certFile: Schema.optional(Schema.String),
  keyFile: Schema.optional(Schema.String)
})

export const NatsConfig = Schema.Struct({
  servers: Schema.optionalWith(Schema.NonEmptyArray(Schema.String), { default: () => ["nats://127.0.0.1:4222"] }),
  subjectPrefix: Schema.optionalWith(SubjectPrefix, { default: () => "iop" }),
  user: Schema.optional(Schema.String),
  pass: Schema.optional(Schema.Redacted(Schema.String)),
  token: Schema.optional(Schema.Redacted(Schema.String)),
  /** A NATS `.creds` file (user JWT and nkey seed), read at connect. */
  credsFile: Schema.optional(Schema.String),
  /** Present (even `{}`): TLS is required. */
  tls: Schema.optional(NatsTlsConfig)
}).pipe(
  Schema.filter((c) =>
    c.pass !== undefined && c.user === undefined ? { path: ["pass"], message: "`pass` needs `user`" } : true
  )
)
export type NatsConfig = typeof NatsConfig.Type

/** The `bus` section of an edge's or a node's config. */
export const BusConfig = Schema.Struct({
  nats: Schema.optionalWith(NatsConfig, { default: () => Schema.decodeSync(NatsConfig)({}) }),
  /** A node silent this long is gone; so is an edge, for the runs it started. */
  nodeTimeoutMs: Schema.optionalWith(PositiveInt, { default: () => 3000 })
})
export type BusConfig = typeof BusConfig.Type

/** The `node` section of `iop node`'s config. */
export const NodeSettings = Schema.Struct({
  id: SubjectToken,
  maxConcurrentRuns: Schema.optionalWith(PositiveInt, { default: () => 8 })
})
export type NodeSettings = typeof NodeSettings.Type

/** The bus could not be reached at start: the edge or node does not start without it. */
export class BusConnectFailed extends Schema.TaggedError<BusConnectFailed>()("BusConnectFailed", {
  servers: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `cannot connect to NATS at ${this.servers}: ${this.reason}`
  }
}
