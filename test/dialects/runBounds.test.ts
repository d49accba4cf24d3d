import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as HashMap from "effect/HashMap"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { OPENING_GRACE_MS } from "../../src/chat/Responder.js"
import { ScriptedProvider, TestServer } from "../../src/testing.js"

/*
 * `runs.firstTokenTimeoutMs` and `runs.maxRunMs` as each API answers them, over HTTP on the TestClock: before
 * anything was written, the API's timeout status with `x-should-retry: false`; after the stream started, the
 * API's terminal error event. The run is stopped on its provider either way, and its summary line and
 * `iop_run_timeouts_total` name the bound.
 */

const layer = TestServer.layer({
  config: { runs: { firstTokenTimeoutMs: 10_000, maxRunMs: 50_000 }, log: { level: "info" } },
  nodes: ScriptedProvider.layer(["m", { id: "quick", runs: { firstTokenTimeoutMs: 2_000 } }])
})

/** One turn of Node's event loop: bytes reach the other side (no time passes on any clock). */
const turn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

interface Answer {
  readonly status: number
  readonly retry: string | null
  readonly text: string
}

const apis = {
  chat_completions: {
    path: "/v1/chat/completions",
    body: (model: string, stream: boolean) => ({ model, stream, messages: [{ role: "user", content: "hi" }] })
  },
  responses: { path: "/v1/responses", body: (model: string, stream: boolean) => ({ model, stream, input: "hi" }) },
  messages: {
    path: "/v1/messages",
    body: (model: string, stream: boolean) => ({ model, stream, max_tokens: 16, messages: [{ role: "user", content: "hi" }] })
  }
} as const
type ApiName = keyof typeof apis

/** Sends the request in a fiber: its status, `x-should-retry` and whole body once it ends. */
const send = (api: ApiName, model: string, stream: boolean) =>
  Effect.gen(function* () {
    const server = yield* TestServer
    const { path, body } = apis[api]
    return yield* Effect.fork(Effect.promise(async (): Promise<Answer> => {
      const response = await fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" },
        body: JSON.stringify(body(model, stream))
      })
      return { status: response.status, retry: response.headers.get("x-should-retry"), text: await response.text() }
    }))
  })

/** The error as the API words it before a response: its type and message. */
const errorOf = (api: ApiName, text: string) => {
  const body = JSON.parse(text) as { error: { type: string; message: string } }
  return api === "messages" ? body.error : { type: body.error.type, message: body.error.message }
}

/** The stream's terminal error event, as the API words it. */
const streamError = (api: ApiName, text: string): unknown => {
  const events = text.split("\n\n").filter((e) => e.includes("data: {"))
  const last = events.filter((e) => e.includes("error")).at(-1) ?? ""
  const data = JSON.parse(last.slice(last.indexOf("data: ") + 6)) as Record<string, any>
  switch (api) {
    case "chat_completions":
      return { ...data["error"], done: text.endsWith("data: [DONE]\n\n") }
    case "responses":
      return { event: last.split("\n")[0], error: data["response"]["error"] }
    case "messages":
      return { event: last.split("\n")[0], error: data["error"] }
  }
}

const metrics = Effect.gen(function* () {
  const server = yield* TestServer
  return yield* Effect.promise(() => fetch(`${server.url}/metrics`).then((r) => r.text()))
})

/** The `run finished` lines' annotations, as the edge logs them. */
const finishedLines: Array<Record<string, unknown>> = []
const captureFinished = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ annotations, message }) => {
    if ((Array.isArray(message) ? message[0] : message) === "run finished") {
      finishedLines.push(Object.fromEntries(HashMap.toEntries(annotations)))
    }
  })
)

const FIRST_TOKEN = "run timed out: no output within 10000 ms"
const MAX_RUN = "run timed out: the run took longer than 50000 ms"

describe("the first-token bound on each API", () => {
  for (const api of Object.keys(apis) as Array<ApiName>) {
    it.scoped(`${api}: before anything was written (the upstream never answered): 504, x-should-retry false`, () =>
      Effect.gen(function* () {
        const answer = yield* send(api, "m", true)
        const run = yield* (yield* ScriptedProvider).nextRun
        yield* TestClock.adjust("9999 millis")
        yield* turn
        expect(Option.isNone(yield* Fiber.poll(answer))).toBe(true)
        yield* TestClock.adjust("1 millis")
        const { status, retry, text } = yield* Fiber.join(answer)
        expect([status, retry]).toEqual([504, "false"])
        expect(errorOf(api, text)).toEqual({ type: api === "messages" ? "timeout_error" : "timeout", message: FIRST_TOKEN })
        yield* run.cancelled
      }).pipe(Effect.provide(layer))
    )

    it.scoped(`${api}: after the stream started (accepted, head written): the terminal error event`, () =>
      Effect.gen(function* () {
        const answer = yield* send(api, "m", true)
        const run = yield* (yield* ScriptedProvider).nextRun
        yield* run.accept
        yield* turn
        yield* TestClock.adjust(OPENING_GRACE_MS)
        yield* turn
        yield* TestClock.adjust(10_000 - OPENING_GRACE_MS)
        const { status, text } = yield* Fiber.join(answer)
        expect(status).toBe(200)
        expect(streamError(api, text)).toEqual(
          api === "chat_completions"
            ? { type: "run_error", message: FIRST_TOKEN, done: true }
            : api === "responses"
            ? { event: "event: response.failed", error: { code: "server_error", message: FIRST_TOKEN } }
            : { event: "event: error", error: { type: "api_error", message: FIRST_TOKEN } }
        )
        yield* run.cancelled
      }).pipe(Effect.provide(layer))
    )
  }

  it.scoped("a model's own bound (its node's `runs`) is the one applied", () =>
    Effect.gen(function* () {
      const answer = yield* send("chat_completions", "quick", true)
      yield* (yield* ScriptedProvider).nextRun
      yield* TestClock.adjust("2 seconds")
      const { status, text } = yield* Fiber.join(answer)
      expect([status, errorOf("chat_completions", text).message]).toEqual([504, "run timed out: no output within 2000 ms"])
    }).pipe(Effect.provide(layer))
  )
})

describe("the run bound on each API", () => {
  for (const api of Object.keys(apis) as Array<ApiName>) {
    it.scoped(`${api}: a non-stream request past it: 504, x-should-retry false`, () =>
      Effect.gen(function* () {
        const answer = yield* send(api, "m", false)
        const run = yield* (yield* ScriptedProvider).nextRun
        yield* TestClock.adjust("49999 millis")
        yield* turn
        expect(Option.isNone(yield* Fiber.poll(answer))).toBe(true)
        yield* TestClock.adjust("1 millis")
        const { status, retry, text } = yield* Fiber.join(answer)
        expect([status, retry]).toEqual([504, "false"])
        expect(errorOf(api, text)).toEqual({ type: api === "messages" ? "timeout_error" : "timeout", message: MAX_RUN })
        yield* run.cancelled
      }).pipe(Effect.provide(layer))
    )

    it.scoped(`${api}: a stream producing a token every 5 s, past it: the terminal error event after its text`, () =>
      Effect.gen(function* () {
        const answer = yield* send(api, "m", true)
        const run = yield* (yield* ScriptedProvider).nextRun
        for (let i = 0; i < 10; i++) {
          yield* run.text(`t${i} `)
          yield* turn
          yield* TestClock.adjust("5 seconds")
        }
        const { status, text } = yield* Fiber.join(answer)
        expect(status).toBe(200)
        expect(text).toContain("t9 ")
        expect(streamError(api, text)).toMatchObject(
          api === "chat_completions" ? { type: "run_error", message: MAX_RUN } : { error: { message: MAX_RUN } }
        )
        yield* run.cancelled
      }).pipe(Effect.provide(layer))
    )
  }
})

describe("the outcome's reason in the summary line and the metrics", () => {
  it.scoped("`run finished` says outcome timeout, error_cause the bound; iop_run_timeouts_total counts it by bound", () =>
    Effect.gen(function* () {
      finishedLines.length = 0
      const first = yield* send("chat_completions", "m", true)
      yield* (yield* ScriptedProvider).nextRun
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.join(first)
      const whole = yield* send("messages", "m", false)
      yield* (yield* ScriptedProvider).nextRun
      yield* TestClock.adjust("50 seconds")
      yield* Fiber.join(whole)
      yield* turn
      expect(finishedLines.map((l) => [l["outcome"], l["error_cause"], l["error"]])).toEqual([
        ["timeout", "first_token", FIRST_TOKEN],
        ["timeout", "max_run", MAX_RUN]
      ])
      const text = yield* metrics
      expect(text).toContain('iop_run_timeouts_total{model="m",bound="first_token"} 1')
      expect(text).toContain('iop_run_timeouts_total{model="m",bound="max_run"} 1')
      expect(text).toContain('iop_runs_total{model="m",outcome="timeout"} 2')
    }).pipe(Effect.provide(layer), Effect.provide(captureFinished))
  )
})
