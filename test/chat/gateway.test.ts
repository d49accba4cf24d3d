import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import { Gateway } from "../../src/chat/Gateway.js"
import { ChatCompletions } from "../../src/index.js"
import { ScriptedProvider, TestEdge } from "../../src/testing.js"
import { exposeInternals } from "../../src/compose.js"

/** The one door: the HTTP routes and the typed API go through the same model resolution, permissions and limits. */

const wire = (model: string): ChatCompletions.ChatCompletionRequest => ({
  model,
  messages: [{ role: "user", content: "hi" }]
})

describe("Gateway", () => {
  it.scoped("the typed API is held to the edge's concurrency limit, as HTTP callers are", () =>
    Effect.gen(function* () {
      const chat = yield* ChatCompletions.ChatCompletions
      const scripted = yield* ScriptedProvider
      const request = yield* chat.request(wire("m"))
      const first = yield* Effect.fork(chat.create(request))
      const run = yield* scripted.nextRun
      const second = yield* Effect.either(chat.create(request))
      expect(Either.isLeft(second) && second.left).toMatchObject({ _tag: "RateLimited", scope: "edge", limit: 1 })
      yield* run.text("done")
      yield* run.complete()
      const answered = yield* Fiber.join(first)
      expect(answered.choices[0]?.message.content).toBe("done")
      // The slot was given back with the first response.
      const third = yield* Effect.fork(chat.create(request))
      const next = yield* scripted.nextRun
      yield* next.complete()
      yield* Fiber.join(third)
    }).pipe(Effect.provide(exposeInternals(TestEdge.layer({ config: { runs: { maxConcurrentRuns: 1 } }, nodes: ScriptedProvider.layer("m") }))))
  )

  it.scoped("a typed request nested 50,000 deep is an InvalidRequest naming the field, not a stack overflow", () =>
    Effect.gen(function* () {
      const chat = yield* ChatCompletions.ChatCompletions
      let deep: unknown = "leaf"
      for (let i = 0; i < 50_000; i++) deep = [deep]
      const built: ChatCompletions.ChatCompletionRequest = {
        ...wire("m"),
        tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { x: { enum: [deep] } } } } }]
      }
      const result = yield* Effect.either(chat.request(built))
      expect(Either.isLeft(result) && result.left).toMatchObject({ _tag: "InvalidRequest" })
      expect(Either.isLeft(result) && result.left.message).toMatch(/^tools\[0\]\.function\.parameters\.properties\.x\.enum\[0\].*: nested deeper than 64 levels$/)
    }).pipe(Effect.provide(exposeInternals(TestEdge.layer({ nodes: ScriptedProvider.layer("m") }))))
  )

  it.scoped("a key may use the models it names (by id or by the alias it called), and no other", () =>
    Effect.gen(function* () {
      const gateway = yield* Gateway
      const key = { id: "k", models: ["m", "alias-of-n"], maxConcurrentRuns: undefined }
      expect((yield* gateway.model("m", key)).id).toBe("m")
      expect((yield* gateway.model("alias-of-n", key)).id).toBe("n")
      const other = yield* Effect.either(gateway.model("n", key))
      expect(Either.isLeft(other) && other.left._tag).toBe("ModelNotFound")
      expect((yield* gateway.model("n")).id).toBe("n")
    }).pipe(Effect.provide(exposeInternals(TestEdge.layer({
      nodes: ScriptedProvider.layer(["m", { id: "n", aliases: ["alias-of-n"] }])
    }))))
  )
})
