import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/**
 * Where the Responses API's stored responses are kept: one record per response, by its id (`resp_…`), each with
 * what `GET /v1/responses/{id}` answers, its input items and whose it is. A backend keeps records and forgets them
 * (by its bounds); it knows nothing of their items: the Responses dialect's `StoredResponses` does. Backends: in
 * memory (`MemoryStore`), NATS JetStream key-value (`NatsStore`, from `iop-edge/nats`), none, or a host app's own.
 */

const JsonRecord = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** A stored response. */
export const StoredResponse = Schema.Struct({
  /** The API key that created it (its name in the config), `null` on an edge without keys: only it may read it. */
  owner: Schema.NullOr(Schema.String),
  /** The response object as it was answered (its `output` holds the output items). */
  response: JsonRecord,
  /** The input items it answered, resolved and in order, each with its `id`. */
  input: Schema.Array(JsonRecord)
})
export type StoredResponse = typeof StoredResponse.Type

/** The store could not be read or written (a backend's failure: the bus is down, a timeout). */
export class ResponseStoreError extends Schema.TaggedError<ResponseStoreError>()("ResponseStoreError", {
  operation: Schema.Literal("read", "write", "delete"),
  reason: Schema.String
}) {
  override get message(): string {
    return `the response store could not ${this.operation}: ${this.reason}`
  }
}

export declare namespace ResponseStore {
  export interface Service {
    /** Whether it keeps anything: a store that does not answers `store: false` and refuses references. */
    readonly enabled: boolean
    /** The record stored under `id`, if it is (and has not expired). */
    readonly get: (id: string) => Effect.Effect<Option.Option<StoredResponse>, ResponseStoreError>
    /** Stores a record under `id`, replacing any. */
    readonly put: (id: string, record: StoredResponse) => Effect.Effect<void, ResponseStoreError>
    /** Forgets `id` (nothing when it is not stored). */
    readonly delete: (id: string) => Effect.Effect<void, ResponseStoreError>
  }
}

export class ResponseStore extends Context.Tag("@iop/edge/ResponseStore")<ResponseStore, ResponseStore.Service>() {}

/** A record as the text a backend keeps. */
export const encode = (record: StoredResponse): string => JSON.stringify(record)

const decodeRecord = Schema.decodeUnknownEither(StoredResponse)

/** A record from a backend's text; a text that is not one (a foreign or damaged value) is a read failure. */
export const decode = (text: string): Either.Either<StoredResponse, ResponseStoreError> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return Either.left(new ResponseStoreError({ operation: "read", reason: "a stored value is not JSON" }))
  }
  return Either.mapLeft(decodeRecord(json), () =>
    new ResponseStoreError({ operation: "read", reason: "a stored value is not a stored response" }))
}

/** The store that keeps nothing (`responses.store.kind: "none"`). */
export const none: ResponseStore.Service = {
  enabled: false,
  get: () => Effect.succeed(Option.none()),
  put: () => Effect.void,
  delete: () => Effect.void
}

export const layerNone: Layer.Layer<ResponseStore> = Layer.succeed(ResponseStore, none)
