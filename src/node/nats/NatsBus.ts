import {
  connect,
  credsAuthenticator,
  type Msg,
  type NatsConnection as Client,
  type NodeConnectionOptions
} from "@nats-io/transport-node"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Mailbox from "effect/Mailbox"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { readFile } from "node:fs/promises"
import type { BusConfig } from "./BusConfig.js"

export { BusConfig, NatsConfig, NatsTlsConfig } from "./BusConfig.js"

/** Client knobs that are not part of the config file (tests shorten them). */
export interface ClientTuning {
  readonly name?: string
  readonly reconnectTimeWaitMs?: number
}

// In BusConfig.ts (no NATS import), so that the nats entry point's types do not load the client's.
export { BusConnectFailed } from "./BusConfig.js"
import { BusConnectFailed } from "./BusConfig.js"

export class BusError extends Schema.TaggedError<BusError>()("BusError", {
  operation: Schema.String,
  subject: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `NATS ${this.operation} on ${this.subject} failed: ${this.reason}`
  }
}

export declare namespace NatsConnection {
  export interface Service {
    /** The underlying client, for what this service does not wrap. */
    readonly client: Client
    readonly subjectPrefix: string
    readonly publish: (subject: string, data: Uint8Array) => Effect.Effect<void, BusError>
    /**
     * `publish` for callbacks: synchronous (the client buffers; nothing waits
     * for a reader), the failure returned instead of raised. With `reply`, the
     * receiver's answer goes there (and the server says there when nobody
     * listens on `subject`: an empty message with status 503, see `isNoResponders`).
     */
    readonly unsafePublish: (subject: string, data: Uint8Array, reply?: string) => BusError | undefined
    /** The largest message the server takes, in bytes (its `max_payload`; 1 MiB until it said). */
    readonly maxPayload: () => number
    /** Publishes a message encoded by `encode`; an encoding failure is a BusError like a failed publish. */
    readonly publishEncoded: <A>(
      subject: string,
      encode: (value: A) => Either.Either<Uint8Array, string>,
      value: A
    ) => Effect.Effect<void, BusError>
    /**
     * Subscribes at once (the server sees the interest before anything this
     * connection publishes next); messages queue until the stream is read.
     * Unsubscribes when the scope closes.
     */
    readonly subscribe: (subject: string) => Effect.Effect<Stream.Stream<Msg, BusError>, BusError, Scope.Scope>
    /**
     * Subscribes at once, like `subscribe`, but hands each message to
     * `onMessage` from the client's own callback: no queue, no fiber. A
     * subscription the server ends (permissions, …) calls `onError` once.
     * Unsubscribes when the scope closes.
     */
    readonly subscribeCallback: (
      subject: string,
      onMessage: (msg: Msg) => void,
      onError: (error: BusError) => void
    ) => Effect.Effect<void, BusError, Scope.Scope>
    readonly flush: Effect.Effect<void, BusError>
    /** Calls `f` each time the client reconnects to the bus, until the scope closes. */
    readonly onReconnect: (f: () => void) => Effect.Effect<void, never, Scope.Scope>
  }
}

export class NatsConnection extends Context.Tag("@iop/edge/NatsConnection")<NatsConnection, NatsConnection.Service>() {}

/** The server's answer to a message published with a reply subject when nobody listens on its subject. */
export const isNoResponders = (msg: Msg): boolean => msg.data.length === 0 && msg.headers?.code === 503

const reasonOf = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/** nats-server's default `max_payload`. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024

const connectOptions = (config: Pick<BusConfig, "nats">, tuning: ClientTuning) =>
  Effect.gen(function* () {
    const nats = config.nats
    const servers = nats.servers.join(", ")
    const creds =
      nats.credsFile === undefined
        ? undefined
        : yield* Effect.tryPromise({
          try: () => readFile(nats.credsFile ?? ""),
          catch: (e) => new BusConnectFailed({ servers, reason: `cannot read credsFile: ${reasonOf(e)}` })
        })
    const options: NodeConnectionOptions = {
      servers: [...nats.servers],
      // A long-lived service: keep reconnecting; liveness is judged by heartbeats, not by the socket.
      maxReconnectAttempts: -1,
      reconnectTimeWait: tuning.reconnectTimeWaitMs ?? 1000,
      // Else every request captures two stack traces (deep under Effect) for errors we only classify.
      noAsyncTraces: true,
      ...(tuning.name !== undefined ? { name: tuning.name } : {}),
      ...(nats.user !== undefined ? { user: nats.user } : {}),
      ...(nats.pass !== undefined ? { pass: Redacted.value(nats.pass) } : {}),
      ...(nats.token !== undefined ? { token: Redacted.value(nats.token) } : {}),
      ...(creds !== undefined ? { authenticator: credsAuthenticator(new Uint8Array(creds)) } : {}),
      ...(nats.tls !== undefined
        ? {
          tls: {
            ...(nats.tls.caFile !== undefined ? { caFile: nats.tls.caFile } : {}),
            ...(nats.tls.certFile !== undefined ? { certFile: nats.tls.certFile } : {}),
            ...(nats.tls.keyFile !== undefined ? { keyFile: nats.tls.keyFile } : {})
          }
        }
        : {})
    }
    return options
  })

const close = (client: Client) =>
  Effect.suspend(() =>
    client.isClosed()
      ? Effect.void
      : Effect.tryPromise(() => client.drain()).pipe(
        // Release runs uninterruptibly; the timeout needs the drain to be interruptible.
        Effect.interruptible,
        Effect.timeout(Duration.seconds(2)),
        Effect.ignore,
        // A drain that could not finish (server gone) still must not leave the socket open.
        Effect.zipRight(Effect.tryPromise(() => client.close()).pipe(Effect.ignore))
      )
  )

/** Connects (only `nats` is read: the response store connects with it too); drains and closes it when the scope closes. */
export const make = (
  config: Pick<BusConfig, "nats">,
  tuning: ClientTuning = {}
): Effect.Effect<NatsConnection.Service, BusConnectFailed, Scope.Scope> =>
  Effect.gen(function* () {
    const servers = config.nats.servers.join(", ")
    const options = yield* connectOptions(config, tuning)
    const client = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => connect(options),
        catch: (e) => new BusConnectFailed({ servers, reason: reasonOf(e) })
      }),
      close
    )
    // Iterated by hand: Stream.fromAsyncIterable's release awaits `return()`, which waits for the pending `next()`.
    const statuses = client.status()[Symbol.asyncIterator]()
    const reconnected = new Set<() => void>()
    yield* Effect.tryPromise(() => statuses.next()).pipe(
      Effect.flatMap((r) => {
        if (r.done === true) return Effect.fail("closed")
        const s = r.value
        if (s.type === "reconnect") for (const f of reconnected) f()
        return s.type === "disconnect" || s.type === "reconnect"
          ? Effect.logInfo(`NATS ${s.type}`).pipe(Effect.annotateLogs({ server: s.server }))
          : Effect.void
      }),
      Effect.forever,
      Effect.ignore,
      Effect.forkScoped
    )

    const unsafePublish = (subject: string, data: Uint8Array, reply?: string): BusError | undefined => {
      try {
        client.publish(subject, data, reply === undefined ? undefined : { reply })
        return undefined
      } catch (e) {
        return new BusError({ operation: "publish", subject, reason: reasonOf(e) })
      }
    }

    const publish = (subject: string, data: Uint8Array) =>
      Effect.suspend(() => {
        const error = unsafePublish(subject, data)
        return error === undefined ? Effect.void : Effect.fail(error)
      })

    const maxPayload = () => client.info?.max_payload ?? DEFAULT_MAX_PAYLOAD

    const publishEncoded = <A>(subject: string, encode: (value: A) => Either.Either<Uint8Array, string>, value: A) =>
      Either.match(encode(value), {
        onLeft: (reason) => Effect.fail(new BusError({ operation: "encode", subject, reason })),
        onRight: (data) => publish(subject, data)
      })

    const subscribe = (subject: string) =>
      Effect.gen(function* () {
        const mailbox = yield* Mailbox.make<Msg, BusError>()
        const failed = (reason: string) => new BusError({ operation: "subscribe", subject, reason })
        yield* Effect.acquireRelease(
          Effect.try({
            try: () =>
              client.subscribe(subject, {
                callback: (err, msg) => {
                  if (err === null) mailbox.unsafeOffer(msg)
                  else mailbox.unsafeDone(Exit.fail(failed(err.message)))
                }
              }),
            catch: (e) => failed(reasonOf(e))
          }),
          (sub) =>
            Effect.try(() => sub.unsubscribe()).pipe(
              Effect.ignore,
              Effect.zipRight(mailbox.end)
            )
        )
        return Mailbox.toStream(mailbox)
      })

    const subscribeCallback = (
      subject: string,
      onMessage: (msg: Msg) => void,
      onError: (error: BusError) => void
    ) => {
      const failed = (reason: string) => new BusError({ operation: "subscribe", subject, reason })
      return Effect.acquireRelease(
        Effect.try({
          try: () => {
            let ended = false
            const end = (error: BusError) => {
              if (ended) return
              ended = true
              onError(error)
            }
            return client.subscribe(subject, {
              callback: (err, msg) => {
                if (ended) return
                if (err !== null) return end(failed(err.message))
                // A throw here would unwind into the client's protocol parser and break the connection.
                try {
                  onMessage(msg)
                } catch (e) {
                  end(failed(`message handler failed: ${reasonOf(e)}`))
                }
              }
            })
          },
          catch: (e) => failed(reasonOf(e))
        }),
        (sub) => Effect.try(() => sub.unsubscribe()).pipe(Effect.ignore)
      ).pipe(Effect.asVoid)
    }

    const flush = Effect.tryPromise({
      try: () => client.flush(),
      catch: (e) => new BusError({ operation: "flush", subject: "", reason: reasonOf(e) })
    })

    return {
      client,
      subjectPrefix: config.nats.subjectPrefix,
      publish,
      unsafePublish,
      maxPayload,
      publishEncoded,
      subscribe,
      subscribeCallback,
      flush,
      onReconnect: (f) =>
        Effect.acquireRelease(Effect.sync(() => reconnected.add(f)), () => Effect.sync(() => reconnected.delete(f)))
    } satisfies NatsConnection.Service
  })

export const layer = (config: BusConfig, tuning?: ClientTuning): Layer.Layer<NatsConnection, BusConnectFailed> =>
  Layer.scoped(NatsConnection, make(config, tuning))
