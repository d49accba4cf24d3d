import * as Either from "effect/Either"
import { InvalidRequest } from "../../chat/EdgeError.js"
import { clip } from "../../common/clip.js"
import type { StoredResponse } from "../../store/ResponseStore.js"
import { decodeItem, itemType } from "./request.js"
import type { InputItem, RawItem, ResponsesRequest } from "./wire.js"

/**
 * Stored responses, the Responses API's side (PURE): the ids the edge hands out and what they name, what a request
 * refers to, the request with its references resolved from the records found, the record a response is kept as,
 * and `input_items` pages. The effects (reading and writing the store) are `StoredResponses`'.
 *
 * Ids: a response is `resp_<s>` (`<s>` the run's unique part: unique across edges); its output items are
 * `msg_<s>_<n>`, `rs_<s>_<n>`, `fc_<s>_<n>` (render.ts; `<n>` the output index) and its input items, as it
 * stores them, `<type>_<s>_in<n>`. Every item id names its response, so one record per response is all a store
 * holds: an item reference is a read of its response's record.
 */

const RESPONSE_ID = /^resp_[A-Za-z0-9_-]{1,200}$/
/** `<prefix>_<s>_<n>` or `<prefix>_<s>_in<n>`: the last `_` starts the index (`<s>` may hold `_`). */
const ITEM_ID = /^[a-z]{1,8}_([A-Za-z0-9_-]{1,200})_(?:in)?\d{1,9}$/

/** Whether `id` has the form of a response id the edge hands out. */
export const isResponseId = (id: string): boolean => RESPONSE_ID.test(id)

/** The response an item id the edge handed out belongs to; undefined for any other id. */
export const responseOfItem = (id: string): string | undefined => {
  const m = ITEM_ID.exec(id)
  return m === null ? undefined : `resp_${m[1]}`
}

const PREFIX: Readonly<Record<string, string>> = {
  message: "msg",
  reasoning: "rs",
  function_call: "fc",
  function_call_output: "fco",
  custom_tool_call: "ctc",
  custom_tool_call_output: "ctco"
}

/** The id of a stored response's `index`-th input item. */
export const inputItemId = (suffix: string, item: RawItem, index: number): string =>
  `${PREFIX[itemType(item)] ?? "item"}_${suffix}_in${index}`

// ---------------------------------------------------------------------------
// references

export interface References {
  readonly previous: string | undefined
  /** The `item_reference`s of `input`, with their index. */
  readonly items: ReadonlyArray<{ readonly index: number; readonly id: string }>
}

/** What a request refers to; undefined when nothing (then nothing is read from the store). */
export const referencesOf = (wire: ResponsesRequest): References | undefined => {
  let items: Array<{ readonly index: number; readonly id: string }> | undefined
  for (let index = 0; index < wire.input.length; index++) {
    const item = wire.input[index]
    if (item !== undefined && item._tag === "Reference") (items ??= []).push({ index, id: item.id })
  }
  const previous = wire.previous_response_id ?? undefined
  return previous === undefined && items === undefined ? undefined : { previous, items: items ?? [] }
}

/** The most stored responses one request may refer to (each is a read of the store). */
export const MAX_REFERENCED_RESPONSES = 64

const quoted = (id: string): string => `'${clip(id, 100)}'`

/** OpenAI's words and code for a previous response it does not have. */
export const previousNotFound = (id: string): InvalidRequest =>
  new InvalidRequest({
    message: `Previous response with id ${quoted(id)} not found.`,
    param: "previous_response_id",
    code: "previous_response_not_found"
  })

export const itemNotFound = (index: number, id: string): InvalidRequest =>
  new InvalidRequest({
    message: `input[${index}]: item with id ${quoted(id)} not found: it was not stored (store: false), has expired or was deleted; send the item itself instead of a reference`,
    param: `input[${index}]`
  })

/** References on an edge that keeps no responses. */
export const notKept = (refs: References): InvalidRequest => {
  const first = refs.items[0]
  const param = refs.previous !== undefined || first === undefined ? "previous_response_id" : `input[${first.index}]`
  return new InvalidRequest({
    message: `${param}: this edge keeps no responses (responses.store.kind "none"): send the whole conversation in input`,
    param
  })
}

/** The responses whose records resolve `refs` (each once); a reference that cannot name a stored one is a 400. */
export const responsesOf = (refs: References): Either.Either<ReadonlyArray<string>, InvalidRequest> => {
  const ids = new Set<string>()
  if (refs.previous !== undefined) {
    if (!isResponseId(refs.previous)) return Either.left(previousNotFound(refs.previous))
    ids.add(refs.previous)
  }
  for (const ref of refs.items) {
    const response = responseOfItem(ref.id)
    if (response === undefined) return Either.left(itemNotFound(ref.index, ref.id))
    ids.add(response)
    if (ids.size > MAX_REFERENCED_RESPONSES) {
      return Either.left(new InvalidRequest({
        message: `input[${ref.index}]: the request refers to items of more than ${MAX_REFERENCED_RESPONSES} stored responses`,
        param: `input[${ref.index}]`
      }))
    }
  }
  return Either.right(Array.from(ids))
}

const isRecord = (u: unknown): u is RawItem => typeof u === "object" && u !== null && !Array.isArray(u)

/** A stored response's output items. */
export const outputOf = (record: StoredResponse): ReadonlyArray<RawItem> => {
  const output = record.response["output"]
  return Array.isArray(output) ? output.filter(isRecord) : []
}

const findItem = (record: StoredResponse, id: string): RawItem | undefined =>
  record.input.find((item) => item["id"] === id) ?? outputOf(record).find((item) => item["id"] === id)

/**
 * The request with its references resolved from the records `found` (those of `responsesOf`, as the store had
 * them): the previous response's input and output items first (its `instructions` are not carried), then `input`
 * with each reference replaced by the item it names. A record is only `owner`'s to use; one that is missing or
 * another's is a 400 naming the reference.
 */
export const resolve = (
  wire: ResponsesRequest,
  refs: References,
  found: ReadonlyMap<string, StoredResponse>,
  owner: string | null,
  keep: boolean
): Either.Either<ResponsesRequest, InvalidRequest> => {
  const visible = (id: string | undefined): StoredResponse | undefined => {
    const record = id === undefined ? undefined : found.get(id)
    return record !== undefined && record.owner === owner ? record : undefined
  }
  const input: Array<InputItem> = []
  const rawInput: Array<RawItem> = []
  const take = (raw: RawItem, root: string, missing: () => InvalidRequest): InvalidRequest | undefined => {
    const item = decodeItem(raw, root)
    if (Either.isLeft(item)) return item.left
    // A stored item is always resolved: a reference there is a damaged record.
    if (item.right._tag === "Reference") return missing()
    input.push(item.right)
    rawInput.push(raw)
    return undefined
  }
  if (refs.previous !== undefined) {
    const id = refs.previous
    const previous = visible(id)
    if (previous === undefined) return Either.left(previousNotFound(id))
    for (const raw of [...previous.input, ...outputOf(previous)]) {
      const failed = take(raw, "previous_response_id", () => previousNotFound(id))
      if (failed !== undefined) return Either.left(failed)
    }
  }
  for (const [index, item] of wire.input.entries()) {
    if (item._tag !== "Reference") {
      input.push(item)
      rawInput.push(wire.rawInput[index] ?? {})
      continue
    }
    const stored = visible(responseOfItem(item.id))
    const raw = stored === undefined ? undefined : findItem(stored, item.id)
    const missing = () => itemNotFound(index, item.id)
    const failed = raw === undefined ? missing() : take(raw, `input[${index}]`, missing)
    if (failed !== undefined) return Either.left(failed)
  }
  return Either.right({ ...wire, input, rawInput, stored: { keep } })
}

// ---------------------------------------------------------------------------
// the record a response is kept as

/** A message as OpenAI lists it: typed, its content as parts. */
const normalized = (item: RawItem): RawItem => {
  if (itemType(item) !== "message") return item
  const content = item["content"]
  if (typeof content !== "string") return { ...item, type: "message" }
  const type = item["role"] === "assistant" ? "output_text" : "input_text"
  return { ...item, type: "message", content: [{ type, text: content }] }
}

const withId = (item: RawItem, id: string): RawItem => {
  const { id: _sent, ...rest } = item
  return { id, ...rest }
}

/** What a response is kept as: the response as answered, its input as resolved (each item with its own id). */
export const recordOf = (
  wire: ResponsesRequest,
  response: RawItem,
  owner: string | null
): { readonly id: string; readonly record: StoredResponse } | undefined => {
  const id = response["id"]
  if (typeof id !== "string" || !isResponseId(id)) return undefined
  const suffix = id.slice("resp_".length)
  const input = wire.rawInput.map((item, i) => withId(normalized(item), inputItemId(suffix, item, i)))
  return { id, record: { owner, response, input } }
}

// ---------------------------------------------------------------------------
// input_items pages

export interface ListQuery {
  readonly order: "asc" | "desc"
  readonly limit: number
  readonly after: string | undefined
  readonly before: string | undefined
}

/** OpenAI's list shape. */
export interface ItemList {
  readonly object: "list"
  readonly data: ReadonlyArray<RawItem>
  readonly first_id: string | null
  readonly last_id: string | null
  readonly has_more: boolean
}

const invalid = (param: string, why: string) =>
  Either.left(new InvalidRequest({ message: `${param}: ${why}`, param }))

/** `GET /v1/responses/{id}/input_items`'s query: `order` (default `desc`), `limit` (1–100, default 20), `after`, `before`. */
export const parseListQuery = (params: URLSearchParams): Either.Either<ListQuery, InvalidRequest> => {
  const order = params.get("order") ?? "desc"
  if (order !== "asc" && order !== "desc") return invalid("order", "must be 'asc' or 'desc'")
  const limitText = params.get("limit") ?? "20"
  const limit = /^\d{1,3}$/.test(limitText) ? Number(limitText) : 0
  if (limit < 1 || limit > 100) return invalid("limit", "must be an integer from 1 to 100")
  return Either.right({ order, limit, after: params.get("after") ?? undefined, before: params.get("before") ?? undefined })
}

/** One page of a response's input items: in `order`, after `after` and before `before` (ids of its items). */
export const listItems = (items: ReadonlyArray<RawItem>, query: ListQuery): Either.Either<ItemList, InvalidRequest> => {
  const ordered = query.order === "asc" ? items : [...items].reverse()
  const position = (id: string | undefined, param: string): Either.Either<number | undefined, InvalidRequest> => {
    if (id === undefined) return Either.right(undefined)
    const at = ordered.findIndex((item) => item["id"] === id)
    return at < 0 ? invalid(param, `${quoted(id)} is not an input item of this response`) : Either.right(at)
  }
  return Either.gen(function* () {
    const after = yield* position(query.after, "after")
    const before = yield* position(query.before, "before")
    const window = ordered.slice(after === undefined ? 0 : after + 1, before ?? ordered.length)
    const data = window.slice(0, query.limit)
    const idOf = (item: RawItem | undefined) => (typeof item?.["id"] === "string" ? item["id"] : null)
    return { object: "list", data, first_id: idOf(data[0]), last_id: idOf(data[data.length - 1]), has_more: window.length > data.length } as const
  })
}
