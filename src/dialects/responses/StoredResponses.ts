import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import { ResponseNotFound } from "../../chat/EdgeError.js"
import type { InvalidRequest } from "../../chat/EdgeError.js"
import type { KeyPolicy } from "../../chat/KeyPolicy.js"
import { ResponseStore, type ResponseStoreError, type StoredResponse } from "../../store/ResponseStore.js"
import type { DialectState } from "../Dialect.js"
import * as Render from "./render.js"
import { context } from "./Responses.js"
import {
  isResponseId,
  type ItemList,
  type ListQuery,
  listItems,
  notKept,
  recordOf,
  referencesOf,
  resolve as resolveFrom,
  responsesOf
} from "./stored.js"
import type { RawItem, ResponsesRequest } from "./wire.js"

/**
 * The Responses API's stored responses (the effects; the logic is `stored.ts`'): a request's references resolved
 * from the `ResponseStore` before its translation, its response kept after it was rendered — a non-stream answer
 * before it is sent, a stream's before its terminal event is written (`StreamRenderer.settle`: the event the
 * client acts on is never ahead of the store) — and the `GET`/`DELETE /v1/responses/{id}` routes. A request that
 * refers to nothing reads nothing; one with `store: false` writes nothing and its stream is rendered as before.
 * A response is its creator's: only the same API key (by its config name) reads, continues or deletes it.
 */
export declare namespace StoredResponses {
  export interface Service extends DialectState<ResponsesRequest> {
    /** `GET /v1/responses/{id}`: the response as it was answered. */
    readonly retrieve: (id: string, key: KeyPolicy | undefined) => Effect.Effect<RawItem, ResponseNotFound | ResponseStoreError>
    /** `DELETE /v1/responses/{id}`, in OpenAI's shape. */
    readonly remove: (
      id: string,
      key: KeyPolicy | undefined
    ) => Effect.Effect<{ readonly id: string; readonly object: "response"; readonly deleted: true }, ResponseNotFound | ResponseStoreError>
    /** `GET /v1/responses/{id}/input_items`: one page of its input items. */
    readonly inputItems: (
      id: string,
      query: ListQuery,
      key: KeyPolicy | undefined
    ) => Effect.Effect<ItemList, ResponseNotFound | ResponseStoreError | InvalidRequest>
  }
}

export class StoredResponses extends Context.Tag("@iop/edge/StoredResponses")<StoredResponses, StoredResponses.Service>() {}

/** How many stored responses one request's references are read at once. */
const READ_CONCURRENCY = 8

const ownerOf = (key: KeyPolicy | undefined): string | null => key?.id ?? null

const isRecord = (u: unknown): u is RawItem => typeof u === "object" && u !== null && !Array.isArray(u)

export const make: Effect.Effect<StoredResponses.Service, never, ResponseStore> = Effect.gen(function* () {
  const store = yield* ResponseStore
  // A stream's save is started from the body's callback (no fiber waits for it): it runs on the layer's runtime.
  const runtime = yield* Effect.runtime<never>()
  const kept = { keep: true } as const
  const notKeptHere = { keep: false } as const

  const resolve: StoredResponses.Service["resolve"] = (wire, key) => {
    const keep = store.enabled && wire.store !== false
    const refs = referencesOf(wire)
    if (refs === undefined) return Effect.succeed({ ...wire, stored: keep ? kept : notKeptHere })
    if (!store.enabled) return Effect.fail(notKept(refs))
    return Effect.gen(function* () {
      const ids = yield* responsesOf(refs)
      const records = yield* Effect.forEach(ids, (id) => Effect.map(store.get(id), (r) => [id, r] as const), {
        concurrency: READ_CONCURRENCY
      })
      const found = new Map<string, StoredResponse>()
      for (const [id, record] of records) if (Option.isSome(record)) found.set(id, record.value)
      return yield* resolveFrom(wire, refs, found, ownerOf(key), keep)
    })
  }

  /** Keeps a response; whether it was kept (a failure is logged: the answer goes out, saying `store: false`). */
  const save = (wire: ResponsesRequest, response: RawItem, key: KeyPolicy | undefined): Effect.Effect<boolean> => {
    const entry = recordOf(wire, response, ownerOf(key))
    if (entry === undefined) return Effect.succeed(false)
    return store.put(entry.id, entry.record).pipe(
      Effect.as(true),
      Effect.catchAll((e) =>
        Effect.logWarning("response not stored").pipe(
          Effect.annotateLogs({ response_id: entry.id, error: e.message }),
          Effect.as(false)
        ))
    )
  }

  const streamRenderer: StoredResponses.Service["streamRenderer"] = (wire, _request, run, key) => {
    const keep = wire.stored?.keep === true
    const renderer = Render.eventRenderer(context(wire, run, keep))
    if (!keep) return renderer
    return {
      ...renderer,
      settle: (end) => {
        const response = renderer.final()
        if (response === undefined) return end("")
        Runtime.runCallback(runtime)(save(wire, response, key), {
          onExit: (exit) => end(renderer.release(Exit.isSuccess(exit) && exit.value))
        })
      }
    }
  }

  const keep: StoredResponses.Service["keep"] = (wire, body, key) =>
    wire.stored?.keep !== true || !isRecord(body)
      ? Effect.succeed(body)
      : Effect.map(save(wire, body, key), (stored) => (stored ? body : { ...body, store: false }))

  /** The record of `id`, when it is stored and `key`'s. */
  const found = (id: string, key: KeyPolicy | undefined) =>
    Effect.flatMap(
      isResponseId(id) ? store.get(id) : Effect.succeed(Option.none<StoredResponse>()),
      (record) =>
        Option.isSome(record) && record.value.owner === ownerOf(key)
          ? Effect.succeed(record.value)
          : Effect.fail(new ResponseNotFound({ id }))
    )

  return {
    resolve,
    streamRenderer,
    keep,
    retrieve: (id, key) => Effect.map(found(id, key), (record) => record.response),
    remove: (id, key) =>
      Effect.flatMap(found(id, key), () => Effect.as(store.delete(id), { id, object: "response", deleted: true } as const)),
    inputItems: (id, query, key) => Effect.flatMap(found(id, key), (record) => listItems(record.input, query))
  } satisfies StoredResponses.Service
})

export const layer: Layer.Layer<StoredResponses, never, ResponseStore> = Layer.effect(StoredResponses, make)
