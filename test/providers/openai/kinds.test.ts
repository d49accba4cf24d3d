import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as OpenAiProvider from "../../../src/providers/openai/OpenAiProvider.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import type { FunctionTool, SubmitRunRequest } from "../../../src/protocol/SubmitRunRequest.js"
import { type FakeUpstreamOptions, type Script, startFakeUpstream, textStream } from "../../support/fakeUpstream.js"
import { collectEvents, makeTestSink } from "./testSink.js"

/**
 * `constraints: "auto"`: the upstream's kind is asked for only by a request that needs a constraint, once (one probe
 * however many wait), bounded by the Clock, asked again no sooner than 30 s after a probe that got no answer, and
 * settled for free by an answer's `Server: llama.cpp`.
 */

const book: FunctionTool = {
  type: "function",
  function: {
    name: "book_flight",
    parameters: { type: "object", properties: { to: { type: "string", pattern: "^[A-Z]{3}$" } }, required: ["to"] }
  }
}
const plain: SubmitRunRequest = { model: "m", messages: [{ role: "user", content: "hi" }], tools: [], sampling: {}, metadata: {} }
const free: SubmitRunRequest = { ...plain, tools: [book], toolChoice: "auto" }
const required: SubmitRunRequest = { ...plain, tools: [book], toolChoice: "required" }

const fakeUpstream = (options: FakeUpstreamOptions, script: Script = { kind: "sse", events: textStream(["ok"]) }) =>
  Effect.acquireRelease(
    Effect.promise(() => startFakeUpstream(script, options)),
    (fake) => Effect.promise(() => fake.close())
  )

const providerFor = (url: string, options: Partial<OpenAiProvider.Options> = {}) =>
  OpenAiProvider.make({ baseUrl: url, upstreamModel: "up", apiKey: undefined, toolMode: "native", ...options })

/** The test with an undici dispatcher for its providers, closed when the test ends. */
const withDispatcher = <A, E, R>(test: Effect.Effect<A, E, R>) => Effect.provide(test, NodeHttpClient.dispatcherLayer)

const constraintOf = (events: ReadonlyArray<RunEvent.RunEvent>): string | undefined => {
  const last = events.at(-1)
  return last?._tag === "Complete" ? last.metadata[RunEvent.CONSTRAINT_KEY] : undefined
}

const paths = (recorded: ReadonlyArray<{ readonly path: string }>) => recorded.map((r) => r.path)
const bodyOf = (fake: { readonly requests: ReadonlyArray<{ readonly body: unknown }> }, i: number) =>
  fake.requests[i]?.body as Record<string, unknown>

const NOT_FOUND = { status: 404, body: { error: "not found" } }
const LLAMA_PROPS = { body: { chat_template: "{{ messages }}", default_generation_settings: {} } }

describe("constraints auto: lazy", () => {
  it.scoped("a request that needs no constraint never causes a probe: the upstream sees only the POSTs", () =>
    withDispatcher(Effect.gen(function*() {
      const fake = yield* fakeUpstream({ routes: { "/props": LLAMA_PROPS } })
      const provider = yield* providerFor(fake.url)
      for (const request of [plain, free, { ...required, toolChoice: "none" as const }]) {
        expect(constraintOf(yield* collectEvents(provider, request))).toBe("none")
      }
      expect(fake.others).toEqual([])
      expect(fake.requests).toHaveLength(3)
      expect(bodyOf(fake, 1)).toHaveProperty("tools")
    })))

  it.scoped("a caller's own constraint needs no probe either: it goes as sent", () =>
    withDispatcher(Effect.gen(function*() {
      const fake = yield* fakeUpstream({ routes: { "/props": LLAMA_PROPS } })
      const provider = yield* providerFor(fake.url)
      yield* collectEvents(provider, { ...required, sampling: { constraints: { grammar: "root ::= \"x\"" } } })
      expect(fake.others).toEqual([])
      expect(bodyOf(fake, 0)).toMatchObject({ grammar: "root ::= \"x\"", tool_choice: "required" })
    })))
})

describe("constraints auto: what the upstream says it is", () => {
  it.scoped("llama.cpp (/props): text mode and the grammar, asked once for the provider's life", () =>
    withDispatcher(Effect.gen(function*() {
      const fake = yield* fakeUpstream({ routes: { "/props": LLAMA_PROPS } })
      const provider = yield* providerFor(fake.url)
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("grammar")
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("grammar")
      expect(paths(fake.others)).toEqual(["/props"])
      const body = bodyOf(fake, 1)
      expect(typeof body["grammar"] === "string" && body["grammar"].includes("book_flight")).toBe(true)
      expect(body).not.toHaveProperty("tools")
    })))

  it.scoped("vLLM (/version answers a version): structured_outputs, or guided_grammar before 0.10.2", () =>
    withDispatcher(Effect.gen(function*() {
      for (const [version, field] of [["0.11.0", "structured_outputs"], ["0.10.1", "guided_grammar"]] as const) {
        const fake = yield* fakeUpstream({ routes: { "/props": NOT_FOUND, "/version": { body: { version } } } })
        const provider = yield* providerFor(fake.url)
        expect(constraintOf(yield* collectEvents(provider, required))).toBe("grammar")
        expect(paths(fake.others)).toEqual(["/props", "/version"])
        expect(bodyOf(fake, 0)).toHaveProperty(field)
      }
    })))

  it.scoped("Ollama (/api/version): the answer's JSON Schema as response_format", () =>
    withDispatcher(Effect.gen(function*() {
      const fake = yield* fakeUpstream({
        routes: { "/props": NOT_FOUND, "/version": NOT_FOUND, "/api/version": { body: { version: "0.12.3" } } }
      })
      const provider = yield* providerFor(fake.url)
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("json_schema")
      expect(paths(fake.others)).toEqual(["/props", "/version", "/api/version"])
      expect(bodyOf(fake, 0)).toMatchObject({ response_format: { type: "json_schema", json_schema: { name: "tool_calls" } } })
    })))

  it.scoped("a whole answer's Complete says how it was constrained too", () =>
    withDispatcher(Effect.gen(function*() {
      const completion = {
        id: "c",
        object: "chat.completion",
        model: "up",
        choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }]
      }
      const fake = yield* fakeUpstream({ routes: { "/props": LLAMA_PROPS } }, { kind: "json", status: 200, body: completion })
      const provider = yield* providerFor(fake.url)
      expect(constraintOf(yield* collectEvents(provider, { ...required, wholeAnswer: true }))).toBe("grammar")
      expect(constraintOf(yield* collectEvents(provider, { ...plain, wholeAnswer: true }))).toBe("none")
      expect(bodyOf(fake, 0)).toMatchObject({ stream: false })
    })))

  it.scoped("nothing known (every route 404): none, settled, not asked again", () =>
    withDispatcher(Effect.gen(function*() {
      const fake = yield* fakeUpstream({})
      const provider = yield* providerFor(fake.url)
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("none")
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("none")
      expect(paths(fake.others)).toEqual(["/props", "/version", "/api/version"])
      expect(bodyOf(fake, 1)).toMatchObject({ tool_choice: "required", tools: [{ function: { name: "book_flight" } }] })
    })))

  it.scoped("LM Studio (every unknown route answers 200 with an error body): none, settled", () =>
    withDispatcher(Effect.gen(function*() {
      const unexpected = (path: string) => ({ body: { error: `Unexpected endpoint or method. (GET ${path})` } })
      const fake = yield* fakeUpstream({
        routes: { "/props": unexpected("/props"), "/version": unexpected("/version"), "/api/version": unexpected("/api/version") }
      })
      const provider = yield* providerFor(fake.url)
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("none")
      yield* TestClock.adjust("1 minute")
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("none")
      expect(paths(fake.others)).toEqual(["/props", "/version", "/api/version"])
    })))

  it.scoped("what its node read of /props is not asked again: llama.cpp's at once, another answer skips /props", () =>
    withDispatcher(Effect.gen(function*() {
      const llama = yield* fakeUpstream({ routes: { "/props": LLAMA_PROPS } })
      const seeded = yield* providerFor(llama.url, { propsRead: "llama.cpp" })
      expect(constraintOf(yield* collectEvents(seeded, required))).toBe("grammar")
      expect(llama.others).toEqual([])
      const other = yield* fakeUpstream({ routes: { "/version": { body: { version: "0.11.0" } } } })
      const skipping = yield* providerFor(other.url, { propsRead: "other" })
      expect(constraintOf(yield* collectEvents(skipping, required))).toBe("grammar")
      expect(paths(other.others)).toEqual(["/version"])
    })))

  it.scoped("a configured kind asks nothing", () =>
    withDispatcher(Effect.gen(function*() {
      const fake = yield* fakeUpstream({ routes: { "/props": LLAMA_PROPS } })
      const provider = yield* providerFor(fake.url, { constraints: "vllm" })
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("grammar")
      expect(bodyOf(fake, 0)).toHaveProperty("structured_outputs")
      const off = yield* providerFor(fake.url, { constraints: "none" })
      expect(constraintOf(yield* collectEvents(off, required))).toBe("none")
      expect(fake.others).toEqual([])
    })))
})

describe("constraints auto: one probe, bounded", () => {
  it.scoped("single-flight: two strict requests at once share one probe", () =>
    withDispatcher(Effect.gen(function*() {
      const fake = yield* fakeUpstream({ routes: { "/props": LLAMA_PROPS } })
      const provider = yield* providerFor(fake.url)
      const both = yield* Effect.all([collectEvents(provider, required), collectEvents(provider, required)], {
        concurrency: "unbounded"
      })
      expect(both.map(constraintOf)).toEqual(["grammar", "grammar"])
      expect(paths(fake.others)).toEqual(["/props"])
    })))

  it.scoped("timeout: routes that never answer hold the request at most the probe's budget (3 s), then none", () =>
    withDispatcher(Effect.gen(function*() {
      const fake = yield* fakeUpstream({ routes: { "/props": "hang", "/version": "hang", "/api/version": "hang" } })
      const provider = yield* providerFor(fake.url)
      const sink = yield* makeTestSink()
      const started = yield* Effect.fork(provider.start(required, sink))
      yield* Effect.yieldNow()
      // /props times out at 2 s, /version is still waiting at 2.999 s: the request is not sent yet.
      yield* TestClock.adjust("2999 millis")
      expect(Option.isNone(yield* Fiber.poll(started))).toBe(true)
      yield* TestClock.adjust("1 millis")
      yield* Fiber.join(started)
      yield* sink.ended.pipe(Effect.andThen(Effect.void))
      expect(constraintOf(sink.events())).toBe("none")
      expect(bodyOf(fake, 0)).toHaveProperty("tools")
    })))

  it.scoped("no answer (a reset connection): none now, asked again no sooner than 30 s later", () =>
    withDispatcher(Effect.gen(function*() {
      const fake = yield* fakeUpstream({ routes: { "/props": (n) => (n === 0 ? "reset" : LLAMA_PROPS) } })
      const provider = yield* providerFor(fake.url)
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("none")
      // A refused or reset route: the next routes of the same host are not asked.
      expect(paths(fake.others)).toEqual(["/props"])
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("none")
      yield* TestClock.adjust("29999 millis")
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("none")
      expect(paths(fake.others)).toEqual(["/props"])
      yield* TestClock.adjust("1 millis")
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("grammar")
      expect(paths(fake.others)).toEqual(["/props", "/props"])
    })))

  it.scoped("a server error (503 while loading) is no answer either", () =>
    withDispatcher(Effect.gen(function*() {
      const fake = yield* fakeUpstream({
        routes: { "/props": (n) => (n === 0 ? { status: 503, body: { error: "Loading model" } } : LLAMA_PROPS) }
      })
      const provider = yield* providerFor(fake.url)
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("none")
      yield* TestClock.adjust("30 seconds")
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("grammar")
    })))
})

describe("constraints auto: passive", () => {
  it.scoped("an answer with Server: llama.cpp settles the kind: a later strict request is constrained, no probe", () =>
    withDispatcher(Effect.gen(function*() {
      const fake = yield* fakeUpstream({ server: "llama.cpp" })
      const provider = yield* providerFor(fake.url)
      expect(constraintOf(yield* collectEvents(provider, plain))).toBe("none")
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("grammar")
      expect(fake.others).toEqual([])
    })))

  it.scoped("any probe answer with Server: llama.cpp settles it too (a proxy that hides /props)", () =>
    withDispatcher(Effect.gen(function*() {
      const fake = yield* fakeUpstream({ server: "llama.cpp b6000", routes: { "/props": NOT_FOUND } })
      const provider = yield* providerFor(fake.url)
      expect(constraintOf(yield* collectEvents(provider, required))).toBe("grammar")
      expect(paths(fake.others)).toEqual(["/props"])
    })))
})
