import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Either from "effect/Either"
import type { InvalidRequest } from "../../../src/chat/EdgeError.js"
import type { Emission } from "../../../src/chat/session.js"
import { runIdSuffix } from "../../../src/chat/Rendering.js"
import { context } from "../../../src/dialects/responses/Responses.js"
import { responseBody } from "../../../src/dialects/responses/render.js"
import { decodeBody } from "../../../src/dialects/responses/request.js"
import {
  isResponseId,
  type ItemList,
  listItems,
  MAX_REFERENCED_RESPONSES,
  parseListQuery,
  recordOf,
  referencesOf,
  resolve,
  responseOfItem,
  responsesOf
} from "../../../src/dialects/responses/stored.js"
import type { RawItem, ResponsesRequest } from "../../../src/dialects/responses/wire.js"
import type { StoredResponse } from "../../../src/store/ResponseStore.js"

/** Stored responses, the pure side: ids, references, resolution, the record kept, input_items pages. */

const decoded = (body: Record<string, unknown>): ResponsesRequest =>
  Either.getOrThrow(decodeBody(JSON.stringify({ model: "m", input: "hi", ...body })))

const left = <A>(e: Either.Either<A, InvalidRequest>): InvalidRequest =>
  Either.isLeft(e) ? e.left : expect.unreachable("expected a 400")

/** A run id's unique part as the run service makes them (base64url, so it may hold `_` and `-`). */
const suffix = fc.stringMatching(/^[A-Za-z0-9_-]{1,24}$/)

const emissions: ReadonlyArray<Emission> = [
  { _tag: "Reasoning", text: "think" },
  { _tag: "Content", text: "hello" },
  { _tag: "ToolCalls", calls: [{ id: "call_1", name: "f", arguments: "{}" }, { id: "call_2", name: "g", arguments: "{}" }] },
  { _tag: "Finish", finishReason: "tool_calls", usage: undefined }
]

/** The response the renderer makes for a run named `run_<s>`. */
const rendered = (s: string, wire: ResponsesRequest) => {
  const run = { runId: `run_${s}`, created: 1 }
  const body = responseBody(context(wire, run), emissions)
  return body._tag === "Body" ? body.body : expect.unreachable("no body")
}

describe("ids", () => {
  it.prop("every item id a response hands out (its output and its stored input) names that response", [suffix], ([s]) => {
    const wire = decoded({ input: [{ role: "user", content: "a" }, { type: "function_call_output", call_id: "c", output: "o" }, { type: "web_search_call" }] })
    const response = rendered(s, wire)
    expect(response.id).toBe(`resp_${runIdSuffix({ runId: `run_${s}`, created: 1 })}`)
    expect(isResponseId(response.id)).toBe(true)
    const kept = recordOf(wire, response, null)
    if (kept === undefined) return expect.unreachable("not kept")
    const ids = [...response.output, ...kept.record.input].map((item) => (item as RawItem)["id"])
    expect(ids).toHaveLength(7)
    for (const id of ids) expect(typeof id === "string" ? responseOfItem(id) : undefined).toBe(response.id)
    expect(new Set(ids).size).toBe(ids.length)
  })

  it("ids of other forms name no response", () => {
    for (const id of ["call_abc", "msg_", "msg__0", "resp_abc", "MSG_a_0", "msg_a_x1", "msg_a b_1", `msg_${"a".repeat(201)}_1`]) {
      expect(responseOfItem(id)).toBeUndefined()
    }
    for (const id of ["resp_", "resp_a b", "rs_a_0", `resp_${"a".repeat(201)}`]) expect(isResponseId(id)).toBe(false)
  })
})

describe("references", () => {
  it("a request that refers to nothing has no references (nothing is read)", () => {
    expect(referencesOf(decoded({}))).toBeUndefined()
    expect(referencesOf(decoded({ previous_response_id: null }))).toBeUndefined()
  })

  it("the responses to read: each once, previous first; a foreign item id or too many responses are 400s naming the item", () => {
    const refs = referencesOf(decoded({
      previous_response_id: "resp_p",
      input: [{ type: "item_reference", id: "rs_a_0" }, { type: "item_reference", id: "fc_a_in2" }, { id: "msg_b_1" }]
    }))
    if (refs === undefined) return expect.unreachable("no references")
    expect(refs.items.map((r) => r.index)).toEqual([0, 1, 2])
    expect(responsesOf(refs)).toEqual(Either.right(["resp_p", "resp_a", "resp_b"]))
    const foreign = left(responsesOf({ previous: undefined, items: [{ index: 4, id: "call_1" }] }))
    expect({ param: foreign.param, message: foreign.message }).toEqual({
      param: "input[4]",
      message: "input[4]: item with id 'call_1' not found: it was not stored (store: false), has expired or was deleted; send the item itself instead of a reference"
    })
    expect(left(responsesOf({ previous: "nope", items: [] }))).toMatchObject({ param: "previous_response_id", code: "previous_response_not_found" })
    const many = Array.from({ length: MAX_REFERENCED_RESPONSES + 1 }, (_, i) => ({ index: i, id: `msg_r${i}_0` }))
    expect(left(responsesOf({ previous: undefined, items: many })).param).toBe(`input[${MAX_REFERENCED_RESPONSES}]`)
  })
})

describe("resolve", () => {
  const first = decoded({ instructions: "Be brief.", input: "weather?" })
  const firstResponse = rendered("one", first)
  const firstRecord = recordOf(first, firstResponse, "key-a")
  const found = new Map<string, StoredResponse>(firstRecord === undefined ? [] : [[firstRecord.id, firstRecord.record]])

  it("previous_response_id: its input and output, then the new input; the new request's own instructions; marked kept", () => {
    const next = decoded({ previous_response_id: firstResponse.id, input: [{ type: "function_call_output", call_id: "call_1", output: "sunny" }] })
    const refs = referencesOf(next)
    if (refs === undefined) return expect.unreachable("no references")
    const resolved = Either.getOrThrow(resolve(next, refs, found, "key-a", true))
    expect(resolved.input.map((i) => i._tag)).toEqual(["Message", "Reasoning", "Message", "FunctionCall", "FunctionCall", "FunctionCallOutput"])
    expect(resolved.rawInput).toHaveLength(resolved.input.length)
    expect(resolved.instructions).toBeUndefined()
    expect(resolved.stored).toEqual({ keep: true })
  })

  it("item references: each replaced by the item it names, where it stood", () => {
    const next = decoded({ input: [{ role: "user", content: "a" }, { type: "item_reference", id: `fc_one_3` }, { id: "rs_one_0" }] })
    const refs = referencesOf(next)
    if (refs === undefined) return expect.unreachable("no references")
    const resolved = Either.getOrThrow(resolve(next, refs, found, "key-a", false))
    expect(resolved.input).toEqual([
      { _tag: "Message", item: { role: "user", content: "a" } },
      { _tag: "FunctionCall", item: { type: "function_call", call_id: "call_2", name: "g", arguments: "{}" } },
      { _tag: "Reasoning", item: { type: "reasoning", summary: [{ text: "think" }] } }
    ])
    expect(resolved.stored).toEqual({ keep: false })
  })

  it("a record that is missing, or another key's, is a 400 naming the reference", () => {
    const byPrevious = decoded({ previous_response_id: firstResponse.id })
    const prevRefs = referencesOf(byPrevious)
    const byItem = decoded({ input: [{ role: "user", content: "a" }, { type: "item_reference", id: "msg_one_1" }] })
    const itemRefs = referencesOf(byItem)
    if (prevRefs === undefined || itemRefs === undefined) return expect.unreachable("no references")
    for (const [records, owner] of [[found, "key-b"], [found, null], [new Map<string, StoredResponse>(), "key-a"]] as const) {
      expect(left(resolve(byPrevious, prevRefs, records, owner, true))).toMatchObject({ param: "previous_response_id", code: "previous_response_not_found" })
      expect(left(resolve(byItem, itemRefs, records, owner, true)).param).toBe("input[1]")
    }
    // An id of the response's form that it does not hold.
    const absent = decoded({ input: [{ type: "item_reference", id: "msg_one_9" }] })
    const absentRefs = referencesOf(absent)
    if (absentRefs === undefined) return expect.unreachable("no references")
    expect(left(resolve(absent, absentRefs, found, "key-a", true)).param).toBe("input[0]")
  })
})

describe("the record kept", () => {
  it("input items get ids of their own (a client's id replaced); messages typed, their text as parts", () => {
    const wire = decoded({
      input: [
        { role: "user", content: "hi", id: "msg_theirs" },
        { type: "message", role: "assistant", content: "earlier" },
        { role: "user", content: [{ type: "input_text", text: "x" }] },
        { type: "function_call_output", call_id: "c", output: "o" }
      ]
    })
    const kept = recordOf(wire, { id: "resp_s_1", output: [] }, null)
    expect(kept?.record.input).toEqual([
      { id: "msg_s_1_in0", type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] },
      { id: "msg_s_1_in1", type: "message", role: "assistant", content: [{ type: "output_text", text: "earlier" }] },
      { id: "msg_s_1_in2", type: "message", role: "user", content: [{ type: "input_text", text: "x" }] },
      { id: "fco_s_1_in3", type: "function_call_output", call_id: "c", output: "o" }
    ])
    expect(responseOfItem("msg_s_1_in0")).toBe("resp_s_1")
    expect(recordOf(wire, { id: "not-a-response" }, null)).toBeUndefined()
  })
})

describe("input_items pages", () => {
  const items = (n: number): ReadonlyArray<RawItem> => Array.from({ length: n }, (_, i) => ({ id: `msg_s_in${i}`, type: "message" }))
  const query = (q: string) => Either.getOrThrow(parseListQuery(new URLSearchParams(q)))

  it("defaults: newest first, 20 at most", () => {
    expect(query("")).toEqual({ order: "desc", limit: 20, after: undefined, before: undefined })
    const page = Either.getOrThrow(listItems(items(25), query("")))
    expect(page.data).toHaveLength(20)
    expect([page.first_id, page.last_id, page.has_more]).toEqual(["msg_s_in24", "msg_s_in5", true])
  })

  it("bad parameters are 400s naming them", () => {
    for (const [q, param] of [["order=ASC", "order"], ["limit=0", "limit"], ["limit=101", "limit"], ["limit=1.5", "limit"], ["limit=-1", "limit"]]) {
      expect(left(parseListQuery(new URLSearchParams(q))).param).toBe(param)
    }
    expect(left(listItems(items(3), query("after=nope"))).param).toBe("after")
    expect(left(listItems(items(3), query("before=nope"))).param).toBe("before")
  })

  it.prop(
    "following `after` page by page gives every item once, in order; before bounds the window",
    [fc.nat(30), fc.integer({ min: 1, max: 100 }), fc.constantFrom("asc", "desc")],
    ([n, limit, order]) => {
      const all = items(n)
      const ordered = order === "asc" ? all : [...all].reverse()
      const seen: Array<RawItem> = []
      let after: string | null = null
      for (;;) {
        const page: ItemList = Either.getOrThrow(listItems(all, query(`order=${order}&limit=${limit}${after === null ? "" : `&after=${after}`}`)))
        seen.push(...page.data)
        expect(page.data.length).toBeLessThanOrEqual(limit)
        if (!page.has_more) break
        after = page.last_id
      }
      expect(seen).toEqual(ordered)
      const middle = ordered[Math.floor(n / 2)]?.["id"]
      if (typeof middle === "string") {
        const window = Either.getOrThrow(listItems(all, query(`order=${order}&limit=100&before=${middle}`)))
        expect(window.data).toEqual(ordered.slice(0, Math.floor(n / 2)))
      }
    }
  )
})
