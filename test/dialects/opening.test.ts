import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as TestClock from "effect/TestClock"
import type { Readable } from "node:stream"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import * as ChatCompletions from "../../src/dialects/chat-completions/dialect.js"
import { KEEP_ALIVE_AFTER_MS } from "../../src/dialects/Dialect.js"
import * as Messages from "../../src/dialects/messages/Messages.js"
import { OPENING_GRACE_MS, Responder } from "../../src/chat/Responder.js"
import * as Responses from "../../src/dialects/responses/Responses.js"
import type { Dialect } from "../../src/dialects/Dialect.js"
import { ScriptedProvider, TestEdge } from "../../src/testing.js"
import { exposeInternals } from "../../src/compose.js"

/**
 * A stream starts when the upstream accepts: once the run was accepted (the upstream answered 200), the client
 * gets its headers and the API's opening event at once, then keep-alives while the run is silent (a long prefill);
 * a run that fails before that is still answered with an HTTP status.
 */

const config = Either.getOrThrow(decodeConfigJson("test", { models: [{ id: "m", provider: { type: "echo" } }] }))
const model = config.models[0]!

const requestOf = <W>(dialect: Dialect<W>, body: object) => {
  const wire = Either.getOrThrow(dialect.decode(JSON.stringify({ model: "m", stream: true, ...body })))
  return { wire, request: Either.getOrThrow(dialect.toChatRequest(wire, model, { maxToolSchemaBytes: 1 << 20 })) }
}

const apis = [
  {
    name: "chat completions",
    open: (responder: Responder.Service) => {
      const { wire, request } = requestOf(ChatCompletions.dialect, { messages: [{ role: "user", content: "hi" }] })
      return responder.stream(request, (run) => ChatCompletions.dialect.streamRenderer(wire, request, run))
    },
    opening: `"delta":{"role":"assistant"`,
    keepAlive: ": keep-alive\n\n",
    error: `"error":`
  },
  {
    name: "responses",
    open: (responder: Responder.Service) => {
      const { wire, request } = requestOf(Responses.dialect, { input: "hi" })
      return responder.stream(request, (run) => Responses.dialect.streamRenderer(wire, request, run))
    },
    opening: "event: response.created",
    keepAlive: ": keep-alive\n\n",
    error: "event: response.failed"
  },
  {
    name: "messages",
    open: (responder: Responder.Service) => {
      const { wire, request } = requestOf(Messages.dialect, { max_tokens: 16, messages: [{ role: "user", content: "hi" }] })
      return responder.stream(request, (run) => Messages.dialect.streamRenderer(wire, request, run))
    },
    opening: "event: message_start",
    keepAlive: "event: ping",
    error: "event: error"
  }
] as const

/** One turn of Node's event loop: the body's pushes reach its `data` listener (no time passes on any clock). */
const turn = Effect.zipRight(Effect.yieldNow(), Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))))

const collect = (body: Readable) => {
  let text = ""
  body.on("data", (chunk: Buffer) => {
    text += chunk.toString("utf8")
  })
  return () => text
}

const count = (text: string, part: string) => text.split(part).length - 1

const layer = exposeInternals(TestEdge.layer({ nodes: ScriptedProvider.layer("m") }))

/** A stream of `api` opened in a fiber, and its scripted run, which the upstream accepted (nothing else yet). */
const acceptedStream = (api: (typeof apis)[number]) =>
  Effect.gen(function* () {
    const responder = yield* Responder
    const scripted = yield* ScriptedProvider
    const opened = yield* Effect.fork(api.open(responder))
    const run = yield* scripted.nextRun
    yield* run.accept
    yield* turn
    return { opened, run }
  })

describe("a stream starts when the upstream accepts", () => {
  for (const api of apis) {
    it.scoped(`${api.name}: accepted and silent → the opening event at once, keep-alives by the Clock, then the text`, () =>
      Effect.gen(function* () {
        const { opened, run } = yield* acceptedStream(api)
        // Accepted and silent: the head goes out once the short grace passed, without a token.
        yield* TestClock.adjust(OPENING_GRACE_MS - 1)
        expect(opened.unsafePoll()).toBe(null)
        yield* TestClock.adjust(1)
        const text = collect(yield* opened.await.pipe(Effect.flatMap((exit) => exit)))
        yield* turn
        expect(text()).toContain(api.opening)
        const before = count(text(), api.keepAlive)
        yield* TestClock.adjust(KEEP_ALIVE_AFTER_MS - 1)
        yield* turn
        expect(count(text(), api.keepAlive)).toBe(before)
        yield* TestClock.adjust(1)
        yield* turn
        expect(count(text(), api.keepAlive)).toBe(before + 1)
        yield* run.text("hello")
        yield* run.complete()
        yield* turn
        expect(text()).toContain("hello")
      }).pipe(Effect.provide(layer))
    )

    it.scoped(`${api.name}: a failure after the upstream accepted, before any output, is the stream's error event`, () =>
      Effect.gen(function* () {
        const { opened, run } = yield* acceptedStream(api)
        yield* TestClock.adjust(OPENING_GRACE_MS)
        const text = collect(yield* opened.await.pipe(Effect.flatMap((exit) => exit)))
        yield* run.fail("upstream exploded")
        yield* turn
        expect(text()).toContain(api.opening)
        expect(text()).toContain(api.error)
      }).pipe(Effect.provide(layer))
    )
  }

  it.scoped("a failure within the grace after the accept (an error event right after the 200) is still an HTTP status", () =>
    Effect.gen(function* () {
      const { opened, run } = yield* acceptedStream(apis[0])
      yield* TestClock.adjust(OPENING_GRACE_MS - 1)
      yield* run.fail("upstream sent an event longer than 8388608 characters")
      const result = yield* Effect.either(opened.await.pipe(Effect.flatMap((exit) => exit)))
      expect(Either.isLeft(result) && result.left._tag).toBe("RunFailed")
    }).pipe(Effect.provide(layer))
  )

  it.scoped("a first token within the grace goes out in the head's write", () =>
    Effect.gen(function* () {
      const { opened, run } = yield* acceptedStream(apis[0])
      yield* run.text("first")
      const body = yield* opened.await.pipe(Effect.flatMap((exit) => exit))
      const chunks: Array<string> = []
      body.on("data", (chunk: Buffer) => chunks.push(chunk.toString("utf8")))
      yield* turn
      expect(chunks[0]).toContain(apis[0].opening)
      expect(chunks[0]).toContain("first")
    }).pipe(Effect.provide(layer))
  )

  it.scoped("a failure before the upstream accepted fails the response (answered with its HTTP status)", () =>
    Effect.gen(function* () {
      const responder = yield* Responder
      const scripted = yield* ScriptedProvider
      const opened = yield* Effect.fork(apis[0].open(responder))
      const run = yield* scripted.nextRun
      yield* run.fail("upstream refused")
      const result = yield* Effect.either(opened.await.pipe(Effect.flatMap((exit) => exit)))
      expect(Either.isLeft(result) && result.left._tag).toBe("RunFailed")
    }).pipe(Effect.provide(layer))
  )

  it.scoped("silent and never accepted: no response yet, and the idle timeout answers with its status", () =>
    Effect.gen(function* () {
      const responder = yield* Responder
      const opened = yield* Effect.fork(apis[0].open(responder))
      yield* turn
      yield* TestClock.adjust(59_999)
      expect(opened.unsafePoll()).toBe(null)
      yield* TestClock.adjust(1)
      const result = yield* Effect.either(opened.await.pipe(Effect.flatMap((exit) => exit)))
      expect(Either.isLeft(result) && result.left._tag).toBe("RunTimedOut")
    }).pipe(Effect.provide(layer))
  )
})
