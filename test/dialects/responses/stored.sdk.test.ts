import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import OpenAI from "openai"
import { ResponseStore, ResponseStoreError, type StoredResponse } from "../../../src/store/ResponseStore.js"
import { chunk, type Script, textStream } from "../../support/fakeUpstream.js"
import { upstreamMessages } from "../../support/toolsReasoning.js"
import { sse, testEdge, toolCallChunk, weather } from "./edge.js"

/**
 * Stored responses through the official `openai` SDK against an edge in this process (in-memory store, the
 * default): `store` honoured, `previous_response_id`, `item_reference`, `responses.retrieve`, `.delete`,
 * `.inputItems.list`, and the store's failures as OpenAI's errors.
 */


/** Step 1 reasons and calls the tool; every later request is answered with text. */
const reasonThenCall = (_: unknown, n: number): Script =>
  n === 0
    ? sse([
      chunk({ role: "assistant", content: "" }),
      chunk({ reasoning_content: "The user wants the weather: call the tool." }),
      toolCallChunk("{\"city\":\"Oslo\"}"),
      chunk({ finish_reason: "tool_calls" })
    ])
    : sse(textStream(["It is ", "sunny."]))

/** `store` as answered (the SDK's `Response` type does not name it). */
const storeOf = (response: object | undefined): unknown => (response === undefined ? undefined : Reflect.get(response, "store"))

const caught = <A>(promise: () => Promise<A>) =>
  Effect.promise(() => promise().then((value) => Either.right(value), (error: unknown) => Either.left(error)))

const apiError = (result: Either.Either<unknown, unknown>): InstanceType<typeof OpenAI.APIError> => {
  const error = Either.isLeft(result) ? result.left : undefined
  expect(error).toBeInstanceOf(OpenAI.APIError)
  return error instanceof OpenAI.APIError ? error : expect.unreachable("not an APIError")
}

const drain = <E>(events: AsyncIterable<E>) =>
  Effect.promise(async () => {
    const out: Array<E> = []
    for await (const e of events) out.push(e)
    return out
  })

/** Every page of a response's input items, as the SDK pages them. */
const allInputItems = (client: OpenAI, id: string, query: { order?: "asc" | "desc"; limit?: number } = {}) =>
  Effect.promise(async () => {
    const items: Array<{ id: string; type: string }> = []
    for await (const item of client.responses.inputItems.list(id, query)) items.push({ id: item.id, type: item.type })
    return items
  })

describe("stored responses through the openai SDK", () => {
  it.scopedLive("store (the default): retrieve answers the response as created; inputItems lists its input; delete forgets it", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(reasonThenCall)
      const client = edge.client()
      const created = yield* Effect.promise(() =>
        client.responses.create({ model: "model", instructions: "Be brief.", input: "weather in Oslo?", tools: [weather] })
      )
      expect(storeOf(created)).toBe(true)
      expect(created.output.map((o) => o.type)).toEqual(["reasoning", "function_call"])
      const retrieved = yield* Effect.promise(() => client.responses.retrieve(created.id))
      expect(retrieved).toEqual(created)
      const items = yield* Effect.promise(() => client.responses.inputItems.list(created.id))
      expect(items.data).toEqual([
        { id: expect.stringMatching(/^msg_.+_in0$/), type: "message", role: "user", content: [{ type: "input_text", text: "weather in Oslo?" }] }
      ])
      expect(items.has_more).toBe(false)
      expect(yield* Effect.promise(() => client.responses.delete(created.id))).toEqual({ id: created.id, object: "response", deleted: true })
      const gone = apiError(yield* caught(() => client.responses.retrieve(created.id)))
      expect(gone).toBeInstanceOf(OpenAI.NotFoundError)
      expect(gone.message).toContain(`Response with id '${created.id}' not found.`)
      expect(apiError(yield* caught(() => client.responses.delete(created.id)))).toBeInstanceOf(OpenAI.NotFoundError)
      expect(apiError(yield* caught(() => client.responses.inputItems.list(created.id).then((p) => p.data)))).toBeInstanceOf(OpenAI.NotFoundError)
    }))

  it.scopedLive("previous_response_id: the upstream sees the previous input and output, then the new input, not the previous instructions", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(reasonThenCall)
      const client = edge.client()
      const first = yield* Effect.promise(() =>
        client.responses.create({ model: "model", instructions: "Be brief.", input: "weather in Oslo?", tools: [weather] })
      )
      const call = first.output.find((o) => o.type === "function_call")
      if (call?.type !== "function_call") return expect.unreachable("no call")
      const second = yield* Effect.promise(() =>
        client.responses.create({
          model: "model",
          previous_response_id: first.id,
          input: [{ type: "function_call_output", call_id: call.call_id, output: "sunny, 21 C" }],
          tools: [weather]
        })
      )
      expect(second.output_text).toBe("It is sunny.")
      expect(second.previous_response_id).toBe(first.id)
      expect(second.instructions).toBeNull()
      expect(upstreamMessages(edge.upstreamBodies()[1])).toEqual([
        { role: "user", content: "weather in Oslo?" },
        {
          role: "assistant",
          content: null,
          reasoning_content: "The user wants the weather: call the tool.",
          tool_calls: [{ id: "call_up_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }]
        },
        { role: "tool", tool_call_id: "call_up_1", content: "sunny, 21 C" }
      ])
      // Its input items are the resolved conversation, each with an id of its own; newest first by default.
      const asc = yield* allInputItems(client, second.id, { order: "asc", limit: 1 })
      expect(asc.map((i) => i.type)).toEqual(["message", "reasoning", "function_call", "function_call_output"])
      expect(asc.map((i) => i.id)).toEqual([0, 1, 2, 3].map((n) => expect.stringMatching(new RegExp(`_in${n}$`))))
      expect(yield* allInputItems(client, second.id)).toEqual([...asc].reverse())
      // A third turn over the second: the whole conversation again, in order.
      yield* Effect.promise(() => client.responses.create({ model: "model", previous_response_id: second.id, input: "and tomorrow?" }))
      expect(upstreamMessages(edge.upstreamBodies()[2]).map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant", "user"])
    }))

  it.scopedLive("item_reference to every item id the edge hands out: reasoning, function call, message, and input items", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(reasonThenCall)
      const client = edge.client()
      const first = yield* Effect.promise(() => client.responses.create({ model: "model", input: "weather in Oslo?", tools: [weather] }))
      const [reasoning, call] = first.output
      if (reasoning === undefined || call?.type !== "function_call") return expect.unreachable("unexpected output")
      const second = yield* Effect.promise(() =>
        client.responses.create({
          model: "model",
          input: [
            { role: "user", content: "weather in Oslo?" },
            { type: "item_reference", id: reasoning.id ?? "" },
            { type: "item_reference", id: call.id ?? "" },
            { type: "function_call_output", call_id: call.call_id, output: "sunny" }
          ],
          tools: [weather]
        })
      )
      expect(upstreamMessages(edge.upstreamBodies()[1])[1]).toMatchObject({
        role: "assistant",
        reasoning_content: "The user wants the weather: call the tool.",
        tool_calls: [{ id: "call_up_1", function: { name: "get_weather" } }]
      })
      const message = second.output.find((o) => o.type === "message")
      const inputs = yield* allInputItems(client, second.id, { order: "asc" })
      // The second's output message and one of its input items (the user's question), by reference.
      yield* Effect.promise(() =>
        client.responses.create({
          model: "model",
          input: [{ type: "item_reference", id: inputs[0]?.id ?? "" }, { type: "item_reference", id: message?.id ?? "" }, { role: "user", content: "thanks" }]
        })
      )
      expect(upstreamMessages(edge.upstreamBodies()[2])).toEqual([
        { role: "user", content: "weather in Oslo?" },
        { role: "assistant", content: "It is sunny." },
        { role: "user", content: "thanks" }
      ])
    }))

  it.scopedLive("stream: created and completed say store true; the stored response is the one response.completed carried", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(reasonThenCall)
      const client = edge.client()
      const events = yield* drain(yield* Effect.promise(() =>
        client.responses.create({ model: "model", input: "weather?", tools: [weather], stream: true })
      ))
      const created = events[0]
      const completed = events[events.length - 1]
      if (created?.type !== "response.created" || completed?.type !== "response.completed") return expect.unreachable("events")
      expect(storeOf(created.response)).toBe(true)
      expect(completed.sequence_number).toBe(events.length - 1)
      // (The SDK adds `output_text` to a response it fetched.)
      const { output_text: _, ...retrieved } = yield* Effect.promise(() => client.responses.retrieve(completed.response.id))
      expect(retrieved).toEqual(completed.response)
      // The stream's function_call, referenced by the next request at once.
      const call = completed.response.output[1]
      yield* Effect.promise(() =>
        client.responses.create({ model: "model", input: [{ type: "item_reference", id: call?.id ?? "" }, { type: "function_call_output", call_id: "call_up_1", output: "ok" }] })
      )
      expect(upstreamMessages(edge.upstreamBodies()[1])[0]).toMatchObject({ role: "assistant", tool_calls: [{ id: "call_up_1" }] })
    }))

  it.scopedLive("a strict model's stream (collected, validated, then written) is stored as its response.completed says", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse(textStream(["Hel", "lo"])))
      const client = edge.client()
      const events = yield* drain(yield* Effect.promise(() => client.responses.create({ model: "strict", input: "x", stream: true })))
      const completed = events[events.length - 1]
      if (completed?.type !== "response.completed") return expect.unreachable("no response.completed")
      expect(storeOf(completed.response)).toBe(true)
      const { output_text: _, ...retrieved } = yield* Effect.promise(() => client.responses.retrieve(completed.response.id))
      expect(retrieved).toEqual(completed.response)
    }))

  it.scopedLive("store: false keeps nothing: answered store false, not retrievable, its items not referable (400 naming input[i])", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(reasonThenCall)
      const client = edge.client()
      for (const stream of [false, true]) {
        const response = stream
          ? (yield* drain(yield* Effect.promise(() => client.responses.create({ model: "model", input: "x", tools: [weather], store: false, stream: true }))))
            .flatMap((e) => (e.type === "response.completed" ? [e.response] : []))[0]
          : yield* Effect.promise(() => client.responses.create({ model: "model", input: "x", tools: [weather], store: false }))
        if (response === undefined) return expect.unreachable("no response")
        expect(storeOf(response)).toBe(false)
        expect(apiError(yield* caught(() => client.responses.retrieve(response.id)))).toBeInstanceOf(OpenAI.NotFoundError)
        const error = apiError(yield* caught(() =>
          client.responses.create({ model: "model", input: [{ role: "user", content: "x" }, { type: "item_reference", id: response.output[0]?.id ?? "" }] })
        ))
        expect(error).toBeInstanceOf(OpenAI.BadRequestError)
        expect(error.param).toBe("input[1]")
        expect(error.message).toContain("not found")
      }
    }))

  it.scopedLive("references that are not stored: OpenAI's previous_response_not_found, an item named by its index, never a 500", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse(textStream(["ok"])))
      const client = edge.client()
      for (const id of ["resp_nope", "not-an-id", "resp_" + "x".repeat(300)]) {
        const e = apiError(yield* caught(() => client.responses.create({ model: "model", input: "x", previous_response_id: id })))
        expect({ status: e.status, param: e.param }).toEqual({ status: 400, param: "previous_response_id" })
        // An id too long to be one is refused as the field's value; the others are OpenAI's "not found".
        if (id.length < 256) expect(e.code).toBe("previous_response_not_found")
      }
      for (const id of ["msg_nope_0", "fc_nope_in3", "call_up_1", "rs_" + "y".repeat(300) + "_1"]) {
        const e = apiError(yield* caught(() =>
          client.responses.create({ model: "model", input: [{ role: "user", content: "x" }, { role: "user", content: "y" }, { type: "item_reference", id }] })
        ))
        // (`input[2].id` for an id too long to be one.)
        expect({ status: e.status, param: e.param?.replace(/\.id$/, "") }).toEqual({ status: 400, param: "input[2]" })
      }
      expect(apiError(yield* caught(() => client.responses.retrieve("resp_nope")))).toBeInstanceOf(OpenAI.NotFoundError)
      expect(apiError(yield* caught(() => client.responses.retrieve("%%")))).toBeInstanceOf(OpenAI.NotFoundError)
      expect(edge.upstream.requests).toHaveLength(0)
    }))

  it.scopedLive("input_items: order, limit, after as OpenAI pages them; a bad limit or order is a 400 naming it", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse(textStream(["ok"])))
      const client = edge.client()
      const input = Array.from({ length: 5 }, (_, i) => ({ role: "user" as const, content: `m${i}` }))
      const created = yield* Effect.promise(() => client.responses.create({ model: "model", input }))
      const page = yield* Effect.promise(() => client.responses.inputItems.list(created.id, { limit: 2 }))
      expect(page.data.map((i) => i.id)).toEqual([4, 3].map((n) => expect.stringMatching(new RegExp(`_in${n}$`))))
      expect(page.has_more).toBe(true)
      const raw = yield* Effect.promise(() =>
        fetch(`${edge.url}/v1/responses/${created.id}/input_items?order=asc&limit=2&after=${page.data[0]?.id ?? ""}`).then((r) => r.json())
      )
      expect(raw).toEqual({ object: "list", data: [], first_id: null, last_id: null, has_more: false })
      expect((yield* allInputItems(client, created.id, { order: "asc", limit: 2 })).map((i) => i.id)).toHaveLength(5)
      for (const [query, param] of [["limit=0", "limit"], ["limit=101", "limit"], ["order=up", "order"], ["after=msg_x_in9", "after"]] as const) {
        const response = yield* Effect.promise(() => fetch(`${edge.url}/v1/responses/${created.id}/input_items?${query}`))
        expect(response.status).toBe(400)
        expect(yield* Effect.promise(() => response.json())).toMatchObject({ error: { type: "invalid_request_error", param } })
      }
      const streamed = yield* Effect.promise(() => fetch(`${edge.url}/v1/responses/${created.id}?stream=true`))
      expect(streamed.status).toBe(400)
    }))

  it.scopedLive("a response is its API key's: another key neither reads, continues, references nor deletes it", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse(textStream(["ok"])), { config: { server: { apiKeys: [{ key: "sk-a", name: "a" }, { key: "sk-b", name: "b" }] } } })
      const a = new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: "sk-a", maxRetries: 0 })
      const b = new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: "sk-b", maxRetries: 0 })
      const created = yield* Effect.promise(() => a.responses.create({ model: "model", input: "secret" }))
      expect((yield* Effect.promise(() => a.responses.retrieve(created.id))).id).toBe(created.id)
      expect(apiError(yield* caught(() => b.responses.retrieve(created.id)))).toBeInstanceOf(OpenAI.NotFoundError)
      expect(apiError(yield* caught(() => b.responses.delete(created.id)))).toBeInstanceOf(OpenAI.NotFoundError)
      expect(apiError(yield* caught(() => b.responses.create({ model: "model", input: "x", previous_response_id: created.id }))).param).toBe("previous_response_id")
      expect(apiError(yield* caught(() => b.responses.create({ model: "model", input: [{ type: "item_reference", id: created.output[0]?.id ?? "" }] }))).param).toBe("input[0]")
      expect(apiError(yield* caught(() => new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: "sk-x", maxRetries: 0 }).responses.retrieve(created.id)))).toBeInstanceOf(OpenAI.AuthenticationError)
      expect((yield* Effect.promise(() => a.responses.retrieve(created.id))).id).toBe(created.id)
    }))

  it.scopedLive("responses.store none: nothing kept (store false), references a 400 saying so", () =>
    Effect.gen(function* () {
      const edge = yield* testEdge(sse(textStream(["ok"])), { config: { responses: { store: { kind: "none" } } } })
      const client = edge.client()
      const created = yield* Effect.promise(() => client.responses.create({ model: "model", input: "x" }))
      expect(storeOf(created)).toBe(false)
      expect(apiError(yield* caught(() => client.responses.retrieve(created.id)))).toBeInstanceOf(OpenAI.NotFoundError)
      const e = apiError(yield* caught(() => client.responses.create({ model: "model", input: "x", previous_response_id: created.id })))
      expect(e.param).toBe("previous_response_id")
      expect(e.message).toContain("this edge keeps no responses")
    }))
})

/** A store over a map whose writes the test gates, or fails. */
const scriptedStore = (options: { readonly gate?: Deferred.Deferred<void>; readonly failing?: boolean }) => {
  const records = new Map<string, StoredResponse>()
  const down = () => new ResponseStoreError({ operation: "read", reason: "the bus is down" })
  const service: ResponseStore.Service = {
    enabled: true,
    get: (id) => (options.failing === true ? Effect.fail(down()) : Effect.sync(() => Option.fromNullable(records.get(id)))),
    put: (id, record) =>
      options.failing === true
        ? Effect.fail(new ResponseStoreError({ operation: "write", reason: "the bus is down" }))
        : Effect.zipRight(options.gate === undefined ? Effect.void : Deferred.await(options.gate), Effect.sync(() => void records.set(id, record))),
    delete: (id) => Effect.sync(() => void records.delete(id))
  }
  return { records, layer: Layer.succeed(ResponseStore, service) }
}

describe("stored responses: the store's timing and failures", () => {
  it.scopedLive("a stream's terminal event waits for the store: response.completed is not written before the response is stored", () =>
    Effect.gen(function* () {
      const gate = yield* Deferred.make<void>()
      const store = scriptedStore({ gate })
      const edge = yield* testEdge(sse(textStream(["Hel", "lo"])), { responseStore: store.layer })
      const response = yield* Effect.promise(() =>
        fetch(`${edge.url}/v1/responses`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "model", input: "x", stream: true }) })
      )
      const reader = response.body!.getReader()
      let text = ""
      // Everything up to the last output event arrives while the store holds the write.
      while (!text.includes("response.output_item.done")) {
        const { done, value } = yield* Effect.promise(() => reader.read())
        if (done) return expect.unreachable("ended before the output")
        text += new TextDecoder().decode(value)
      }
      expect(text).not.toContain("response.completed")
      expect(store.records.size).toBe(0)
      yield* Deferred.succeed(gate, undefined)
      for (;;) {
        const { done, value } = yield* Effect.promise(() => reader.read())
        if (done) break
        text += new TextDecoder().decode(value)
      }
      expect(text).toContain("event: response.completed")
      expect(store.records.size).toBe(1)
    }))

  it.scopedLive("a store that fails: references are a 503 in OpenAI's shape; a response it could not keep says store: false and is logged", () =>
    Effect.gen(function* () {
      const store = scriptedStore({ failing: true })
      const edge = yield* testEdge(sse(textStream(["ok"])), { responseStore: store.layer })
      const client = edge.client()
      const e = apiError(yield* caught(() => client.responses.create({ model: "model", input: "x", previous_response_id: "resp_abc" })))
      expect({ status: e.status, type: e.type }).toEqual({ status: 503, type: "service_unavailable" })
      expect(e.message).toContain("the response store could not read: the bus is down")
      expect(apiError(yield* caught(() => client.responses.retrieve("resp_abc"))).status).toBe(503)
      const created = yield* Effect.promise(() => client.responses.create({ model: "model", input: "x" }))
      expect(storeOf(created)).toBe(false)
      const events = yield* drain(yield* Effect.promise(() => client.responses.create({ model: "model", input: "x", stream: true })))
      const last = events[events.length - 1]
      expect(last?.type === "response.completed" ? storeOf(last.response) : undefined).toBe(false)
      expect(edge.logs.filter((l) => l.message === "response not stored")).toHaveLength(2)
    }))
})
