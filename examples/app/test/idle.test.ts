import { expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import { ChatCompletions } from "iop-edge"
import { ScriptedProvider, TestEdge } from "iop-edge/testing"

// The idle-timeout proof: a run whose provider stays silent fails with RunTimedOut at 30 s, not before.
it.scoped("a silent run times out after the configured 30 s", () =>
  Effect.gen(function* () {
    const scripted = yield* ScriptedProvider
    const request = yield* ChatCompletions.request({ model: "mine", messages: [{ role: "user", content: "hi" }] })
    const outcome = yield* Effect.fork(Effect.flip(ChatCompletions.create(request)))
    yield* scripted.nextRun
    yield* TestClock.adjust("29 seconds")
    expect(Option.isNone(yield* Fiber.poll(outcome))).toBe(true)
    yield* TestClock.adjust("1 second")
    expect((yield* Fiber.join(outcome))._tag).toBe("RunTimedOut")
  }).pipe(Effect.provide(TestEdge.layer({ config: { runs: { idleTimeoutMs: 30_000 } }, nodes: ScriptedProvider.layer("mine") })))
)
