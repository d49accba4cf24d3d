import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Match from "effect/Match"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as ChatRun from "../../../src/chat/ChatRun.js"
import * as EdgeConfig from "../../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../../src/config/loadConfig.js"
import { layer as chatCompletionsLayer } from "../../../src/dialects/chat-completions/typedApi.js"
import { chatRequestOf } from "../../../src/dialects/chat-completions/prepared.js"
import { decodeBody } from "../../../src/dialects/chat-completions/request.js"
import { sseError } from "../../../src/dialects/chat-completions/render.js"
import { layer as gatewayLayer } from "../../../src/chat/Gateway.js"
import { layer as responderLayer } from "../../../src/chat/Responder.js"
import * as StoredResponses from "../../../src/dialects/responses/StoredResponses.js"
import * as ResponseStore from "../../../src/store/ResponseStore.js"
import { layerApp as appLayer } from "../../../src/http/HttpLive.js"
import { layer as lifecycleLayer } from "../../../src/http/Lifecycle.js"
import { layerFromConfig as limitsLayer } from "../../../src/chat/Limits.js"
import { ChatCompletion, ChatCompletionChunk, ChatCompletions } from "../../../src/index.js"
import { layerTest as metricsTestLayer } from "../../../src/observability/Metrics.js"
import { messageText } from "../../../src/providers/echo/Echo.js"
import { fromStream } from "../../../src/providers/Provider.js"
import { type NodeConnection, NodeRegistry, layer as nodeRegistryLayer } from "../../../src/run/NodeRegistry.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import * as RunServiceM from "../../../src/run/RunService.js"

/**
 * The typed Chat Completions API (`ChatCompletions.request` / `create` / `stream`) through the real layers — the
 * Responder, the chat plane, the RunService and its registry — over a node that plays one script per user
 * message; the same requests over HTTP (the routes on a test server) prove the Schemas match the wire.
 */

const complete = (fields: Partial<Parameters<typeof RunEvent.complete>[0]> = {}) =>
  RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {}, ...fields })

const weatherCall = { id: "call_1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" }

/** What the node plays, by the request's last user message. */
const scripts: Record<string, Stream.Stream<RunEvent.RunEvent>> = {
  hello: Stream.make(
    RunEvent.reasoningDelta("the user greets"),
    RunEvent.delta("Hello"),
    RunEvent.delta(", world"),
    complete({ usage: { inputTokens: 3, outputTokens: 2, cachedInputTokens: 1, reasoningTokens: 4 } })
  ).pipe(Stream.rechunk(1)),
  weather: Stream.make(
    RunEvent.delta("Let me check."),
    complete({ finishReason: "tool_calls", toolCalls: [weatherCall], usage: { inputTokens: 9, outputTokens: 5 } })
  ).pipe(Stream.rechunk(1)),
  invalid: Stream.make(complete({ finishReason: "tool_calls", toolCalls: [{ ...weatherCall, arguments: "{\"city\":1}" }] })),
  logprobs: Stream.make(
    RunEvent.deltaWithLogprobs("Hi", [{ token: "Hi", logprob: -0.5, bytes: [72, 105], topLogprobs: [{ token: "Yo", logprob: -2 }] }]),
    complete()
  ),
  noUsage: Stream.make(RunEvent.delta("quiet"), complete()),
  limited: Stream.make(
    RunEvent.delta("partial"),
    RunEvent.failed("upstream answered HTTP 429: slow down", { status: 429, message: "slow down", retryAfter: 7 })
  ).pipe(Stream.rechunk(1)),
  rejected: Stream.make(RunEvent.failed("upstream answered HTTP 400: too long", { status: 400, message: "too long", code: "context_length_exceeded" })),
  hang: Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.never))
}

const config = Either.getOrThrow(
  decodeConfigJson("test", {
    models: [
      { id: "m", provider: { type: "echo" } },
      { id: "strict", provider: { type: "echo" }, output: { strict: true } },
      { id: "buffered", provider: { type: "echo" }, output: { strict: true, streamBuffer: true } },
      // Served by a node that takes no run.
      { id: "orphan", provider: { type: "echo" } }
    ]
  })
)

/** A node playing `scripts`; `cancelled` completes with the first run whose scope closed before its script ended. */
const playingNode = Effect.gen(function* () {
  const started: Array<string> = []
  const cancelled = yield* Deferred.make<string>()
  const connection: NodeConnection = {
    id: RunEvent.NodeId.make("n1"),
    models: config.models.filter((m) => m.id !== "orphan"),
    maxConcurrentRuns: Number.POSITIVE_INFINITY,
    start: (runId, request, sink) =>
      Effect.gen(function* () {
        started.push(runId)
        const last = request.messages[request.messages.length - 1]
        const script = scripts[last === undefined ? "" : messageText(last)] ?? Stream.dieMessage("no script")
        let finished = false
        yield* Effect.addFinalizer(() => (finished ? Effect.void : Deferred.succeed(cancelled, runId)))
        yield* fromStream(() => script.pipe(Stream.onEnd(Effect.sync(() => (finished = true))))).start(request, sink)
      })
  }
  return { connection, started, cancelled }
})

/** A node serving `orphan` that is always full. */
const fullNode: NodeConnection = {
  id: RunEvent.NodeId.make("full"),
  models: config.models.filter((m) => m.id === "orphan"),
  maxConcurrentRuns: 0,
  start: () => Effect.void
}

/** The edge's services over the node, and its routes on a test server. */
const setup = Effect.gen(function* () {
  const node = yield* playingNode
  const register = Layer.scopedDiscard(
    Effect.flatMap(NodeRegistry, (r) => Effect.zipRight(r.register(node.connection), r.register(fullNode)))
  )
  const services = Layer.merge(chatCompletionsLayer, StoredResponses.layer.pipe(Layer.provide(ResponseStore.layerNone))).pipe(
    Layer.provideMerge(gatewayLayer),
    Layer.provideMerge(Layer.merge(responderLayer, limitsLayer)),
    Layer.provideMerge(ChatRun.layer({ toolValidationAttempts: 2, traceStreams: false })),
    Layer.provideMerge(Layer.merge(metricsTestLayer, register)),
    Layer.provideMerge(RunServiceM.layer({ idleTimeoutMs: 60_000 })),
    Layer.provideMerge(nodeRegistryLayer),
    Layer.provideMerge(EdgeConfig.layer(config))
  )
  const layer = appLayer.pipe(
    Layer.provide(lifecycleLayer),
    Layer.provideMerge(services),
    Layer.provideMerge(NodeHttpServer.layerTest)
  )
  return { node, layer }
})

type ChatCompletionRequest = ChatCompletions.ChatCompletionRequest
type PreparedRequest = ChatCompletions.PreparedRequest

const wire = (message: string, fields: Partial<ChatCompletionRequest> = {}): ChatCompletionRequest => ({
  model: "m",
  messages: [{ role: "user", content: message }],
  ...fields
})

const chatRequest = (w: ChatCompletionRequest): Effect.Effect<PreparedRequest, never, ChatCompletions.ChatCompletions> =>
  Effect.orDie(ChatCompletions.request(w))

/** The same request over HTTP: the response body's text. */
const overHttp = (w: ChatCompletionRequest) =>
  Effect.flatMap(HttpClient.HttpClient, (client) =>
    client.execute(HttpClientRequest.post("/v1/chat/completions").pipe(HttpClientRequest.bodyUnsafeJson(w)))).pipe(
      Effect.flatMap((response) => response.text),
      Effect.orDie
    )

const decodeCompletion = Schema.decodeUnknownSync(ChatCompletion)
const decodeChunk = Schema.decodeUnknownSync(ChatCompletionChunk)

/** Every error of the API, by tag: compiles only while the handlers cover the whole union. */
const explain = <A>(effect: Effect.Effect<A, ChatCompletions.ResponseError>): Effect.Effect<A | string> =>
  Effect.catchTags(effect, {
    RateLimited: (e) => Effect.succeed(`rate limited: ${e.limit}`),
    NoNodeForModel: (e) => Effect.succeed(`no node for ${e.model}`),
    NodesAtCapacity: (e) => Effect.succeed(`at capacity: ${e.model}`),
    NodeUnavailable: (e) => Effect.succeed(`node unavailable: ${e.reason}`),
    RunRequestTooLarge: (e) => Effect.succeed(`too large: ${e.bytes}`),
    RunFailed: (e) => Effect.succeed(`failed: ${e.reason}`),
    RunTimedOut: (e) => Effect.succeed(`timed out after ${e.ms} ms`),
    ToolValidationFailed: (e) => Effect.succeed(`invalid tool call: ${e.reason}`),
    ToolValidationRetryFailed: (e) => Effect.succeed(`retry failed: ${e.reason}`),
    UpstreamRejected: (e) => Effect.succeed(`upstream ${e.status}: ${e.message}`)
  })

/** The same, as an exhaustive `Match` on a value. */
const tagOf = Match.type<ChatCompletions.ResponseError>().pipe(
  Match.tagsExhaustive({
    RateLimited: () => "limit",
    NoNodeForModel: () => "submit",
    NodesAtCapacity: () => "submit",
    NodeUnavailable: () => "submit",
    RunRequestTooLarge: () => "submit",
    RunFailed: () => "outcome",
    RunTimedOut: () => "outcome",
    ToolValidationFailed: () => "outcome",
    ToolValidationRetryFailed: () => "outcome",
    UpstreamRejected: () => "outcome"
  })
)

/** A stream's items and then its failure, if any. */
const itemsAndFailure = <A, E, R>(stream: Stream.Stream<A, E, R>) =>
  Effect.map(Stream.runCollect(Stream.either(stream)), (all) => {
    const out = Chunk.toReadonlyArray(all)
    const items = out.flatMap((e) => (Either.isRight(e) ? [e.right] : []))
    const failure = out.flatMap((e) => (Either.isLeft(e) ? [e.left] : []))
    return { items, failure: failure[0] }
  })

const contentOf = (chunks: ReadonlyArray<ChatCompletionChunk>) =>
  chunks.map((c) => c.choices.map((ch) => ch.delta.content ?? "").join("")).join("")

/** A completion without what differs between two runs of one request. */
const runFree = ({ id: _id, created: _created, ...rest }: ChatCompletion) => rest

describe("typed Chat Completions API", () => {
  it.scoped("create returns a ChatCompletion that decodes, as the HTTP body of the same request does", () =>
    Effect.gen(function* () {
      const { layer } = yield* setup
      yield* Effect.gen(function* () {
        const chat = yield* ChatCompletions.ChatCompletions
        const typed = yield* chat.create(yield* chatRequest(wire("hello")))
        expect(decodeCompletion(typed)).toEqual(typed)
        const http = decodeCompletion(JSON.parse(yield* overHttp(wire("hello"))))
        expect(runFree(http)).toEqual(runFree(typed))
        expect(typed).toMatchObject({
          object: "chat.completion",
          model: "m",
          choices: [{
            index: 0,
            message: { role: "assistant", content: "Hello, world", refusal: null, reasoning_content: "the user greets" },
            logprobs: null,
            finish_reason: "stop"
          }],
          usage: {
            prompt_tokens: 3,
            completion_tokens: 2,
            total_tokens: 5,
            prompt_tokens_details: { cached_tokens: 1 },
            completion_tokens_details: { reasoning_tokens: 4 }
          }
        })
        // The reasoning field the request asks for.
        const both = yield* chat.create(yield* chatRequest(wire("hello", { metadata: { iop_reasoning_field: "both" } })))
        expect(both.choices[0]?.message).toMatchObject({ reasoning_content: "the user greets", reasoning: "the user greets" })
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("stream yields the role chunk, then chunks whose content concatenates to the completion's", () =>
    Effect.gen(function* () {
      const { layer } = yield* setup
      yield* Effect.gen(function* () {
        const request = yield* chatRequest(wire("hello", { stream_options: { include_usage: true } }))
        const chunks = Chunk.toReadonlyArray(yield* Stream.runCollect(ChatCompletions.stream(request)))
        const completion = yield* ChatCompletions.create(request)
        for (const c of chunks) expect(decodeChunk(c)).toEqual(c)
        expect(chunks[0]?.choices[0]?.delta).toEqual({ role: "assistant", content: "" })
        expect(contentOf(chunks)).toBe(completion.choices[0]?.message.content)
        expect(chunks.map((c) => c.choices[0]?.delta.reasoning_content ?? "").join("")).toBe("the user greets")
        expect(chunks.at(-2)?.choices).toEqual([{ index: 0, delta: {}, logprobs: null, finish_reason: "stop" }])
        expect(chunks.at(-1)).toMatchObject({ choices: [], usage: completion.usage })
        expect(new Set(chunks.map((c) => c.id)).size).toBe(1)
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("a tool-call run: the calls in the completion and whole in one streamed delta; strict-buffered too", () =>
    Effect.gen(function* () {
      const { layer } = yield* setup
      yield* Effect.gen(function* () {
        const tools = [{
          type: "function" as const,
          function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }
        }]
        const expected = { id: "call_1", type: "function", function: { name: "get_weather", arguments: weatherCall.arguments } }
        for (const model of ["m", "strict", "buffered"]) {
          const request = yield* chatRequest(wire("weather", { model, tools }))
          const completion = yield* ChatCompletions.create(request)
          expect(completion.choices[0]).toMatchObject({
            message: { content: "Let me check.", tool_calls: [expected] },
            finish_reason: "tool_calls"
          })
          const chunks = Chunk.toReadonlyArray(yield* Stream.runCollect(ChatCompletions.stream(request)))
          const calls = chunks.flatMap((c) => c.choices.flatMap((ch) => ch.delta.tool_calls ?? []))
          expect(calls).toEqual([{ index: 0, ...expected }])
          expect(contentOf(chunks)).toBe("Let me check.")
          expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("tool_calls")
        }
        const callsOnly = yield* ChatCompletions.create(yield* chatRequest(wire("invalid", { tools })))
        expect(callsOnly.choices[0]?.message.content).toBeNull()
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("a failing run fails create and stream with its typed error, before or after output", () =>
    Effect.gen(function* () {
      const { layer } = yield* setup
      yield* Effect.gen(function* () {
        const chat = yield* ChatCompletions.ChatCompletions
        const tools = [{ type: "function" as const, function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }]
        // `items`: the chunks before the failure — the role chunk and the text so far once the stream started
        // (an SSE body would have carried them before its error event); none for a failure before any output.
        const cases = [
          { ask: wire("limited"), said: "upstream 429: slow down", kind: "outcome", items: 2, content: "partial" },
          { ask: wire("rejected"), said: "upstream 400: too long", kind: "outcome", items: 0, content: "" },
          { ask: wire("invalid", { model: "strict", tools }), said: "invalid tool call", kind: "outcome", items: 1, content: "" },
          { ask: wire("invalid", { model: "buffered", tools }), said: "invalid tool call", kind: "outcome", items: 1, content: "" },
          { ask: wire("hello", { model: "orphan" }), said: "at capacity: orphan", kind: "submit", items: 0, content: "" }
        ]
        for (const { ask, said, kind, items: count, content } of cases) {
          const request = yield* chatRequest(ask)
          const created: Effect.Effect<ChatCompletion | string> = explain(chat.create(request))
          expect(yield* created).toContain(said)
          const { items, failure } = yield* itemsAndFailure(chat.stream(request))
          expect(failure === undefined ? "none" : tagOf(failure)).toBe(kind)
          expect(yield* explain(failure === undefined ? Effect.succeed("none") : Effect.fail(failure))).toContain(said)
          expect(items).toHaveLength(count)
          expect(contentOf(items)).toBe(content)
        }
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("request: the model resolved and the request checked as the HTTP route does", () =>
    Effect.gen(function* () {
      const { layer } = yield* setup
      yield* Effect.gen(function* () {
        const missing = yield* Effect.flip(ChatCompletions.request(wire("hello", { model: "nope" })))
        expect(missing).toMatchObject({ _tag: "ModelNotFound", model: "nope" })
        const badChoice = yield* Effect.flip(
          ChatCompletions.request(wire("hello", { tool_choice: { type: "function", function: { name: "absent" } } }))
        )
        expect(badChoice).toMatchObject({ _tag: "InvalidRequest", param: "tool_choice" })
        // The body's range checks hold in code too, with the error POST answers.
        for (const [field, value] of [["temperature", 5], ["max_tokens", -1], ["top_p", 1.5], ["top_logprobs", 21]] as const) {
          const refused = yield* Effect.flip(ChatCompletions.request(wire("hello", { [field]: value })))
          expect(refused).toMatchObject({ _tag: "InvalidRequest", param: field })
          const body = decodeBody(JSON.stringify(wire("hello", { [field]: value })))
          expect(Either.isLeft(body) ? body.left.message : "accepted").toBe(refused.message)
        }
        const prepared = yield* chatRequest(wire("hello", { model: "strict", temperature: 0.2 }))
        expect(prepared.model).toBe("strict")
        const request = chatRequestOf(prepared)
        expect(request).toMatchObject({ api: "chat_completions", submit: { model: "strict", sampling: { temperature: 0.2 } } })
        expect(request.policy.strict).toBe(true)
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("cancel: interrupting the stream cancels the run (the node sees its scope closed)", () =>
    Effect.gen(function* () {
      const { node, layer } = yield* setup
      yield* Effect.gen(function* () {
        const request = yield* chatRequest(wire("hang"))
        const first = yield* Deferred.make<void>()
        const fiber = yield* ChatCompletions.stream(request).pipe(
          Stream.tap(() => Deferred.succeed(first, undefined)),
          Stream.runDrain,
          Effect.fork
        )
        yield* Deferred.await(first)
        yield* Fiber.interrupt(fiber)
        expect(yield* Deferred.await(node.cancelled)).toBe(node.started[0])
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("cancel: a consumer that stops pulling (Stream.take) closes the stream and cancels the run", () =>
    Effect.gen(function* () {
      const { node, layer } = yield* setup
      yield* Effect.gen(function* () {
        const taken = yield* Stream.runCollect(Stream.take(ChatCompletions.stream(yield* chatRequest(wire("hang"))), 2))
        expect(contentOf(Chunk.toReadonlyArray(taken))).toBe("a")
        expect(yield* Deferred.await(node.cancelled)).toBe(node.started[0])
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("round trip: every SSE chunk of the HTTP path decodes, and is the typed stream's chunk, byte for byte", () =>
    Effect.gen(function* () {
      const { layer } = yield* setup
      yield* Effect.gen(function* () {
        const asks = [
          wire("hello", { stream_options: { include_usage: true }, metadata: { iop_reasoning_field: "reasoning" } }),
          wire("weather", { tools: [{ type: "function", function: { name: "get_weather" } }] }),
          wire("logprobs", { logprobs: true }),
          wire("noUsage", { stream_options: { include_usage: true } }),
          wire("limited")
        ]
        for (const ask of asks) {
          const sse = yield* overHttp({ ...ask, stream: true })
          const frames = sse.split("\n\n").filter((f) => f !== "")
          expect(frames.at(-1)).toBe("data: [DONE]")
          const { items, failure } = yield* itemsAndFailure(ChatCompletions.stream(yield* chatRequest(ask)))
          const chunkFrames = failure === undefined ? frames.slice(0, -1) : frames.slice(0, -2)
          const wireChunks = chunkFrames.map((f) => decodeChunk(JSON.parse(f.slice("data: ".length))))
          expect(wireChunks).toHaveLength(items.length)
          // The id and created of the HTTP run, on the typed chunks (same key order): then the text is the same.
          const id = wireChunks[0]?.id ?? ""
          const created = wireChunks[0]?.created ?? 0
          expect(chunkFrames).toEqual(items.map((c) => `data: ${JSON.stringify({ ...c, id, created })}`))
          if (failure !== undefined) {
            expect(failure._tag).toBe("UpstreamRejected")
            if (failure._tag === "UpstreamRejected") expect(frames.at(-2)).toBe(`data: ${JSON.stringify(sseError(failure))}`)
          }
        }
      }).pipe(Effect.provide(layer))
    }))
})
