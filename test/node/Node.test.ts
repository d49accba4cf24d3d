import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Exit from "effect/Exit"
import * as TestClock from "effect/TestClock"
import { ModelConfig } from "../../src/config/EdgeConfig.js"
import * as Node from "../../src/node/Node.js"
import { NodeId, RunId } from "../../src/protocol/RunEvent.js"
import type { SubmitRunRequest } from "../../src/protocol/SubmitRunRequest.js"
import { RecordingSink } from "../../src/testing.js"

const echo = Schema.decodeUnknownSync(ModelConfig)({ id: "echo", provider: { type: "echo", tokenDelayMs: 10 } })
const make = Node.servedFromConfig([echo]).pipe(
  Effect.map((models) => Node.make({ id: NodeId.make("n"), models, maxConcurrentRuns: 4 })),
  Effect.provide(NodeHttpClient.dispatcherLayer)
)
const request = (model: string, text: string): SubmitRunRequest => ({
  model,
  messages: [{ role: "user", content: text }],
  tools: [],
  sampling: {},
  metadata: {}
})

describe("Node", () => {
  it.scoped("executes a run with the model's provider, into the run's sink", () =>
    Effect.gen(function* () {
      const node = yield* make
      const rec = yield* RecordingSink.make
      yield* node.execute(RunId.make("r1"), request("echo", "hi there"), rec.sink)
      const fiber = yield* Effect.fork(rec.ended)
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(fiber)
      expect((yield* rec.events).map((e) => (e._tag === "Delta" ? e.text : e._tag))).toEqual(["hi", " the", "re", "Complete"])
    })
  )

  it.scoped("an unknown model is a Failed event, not a crash", () =>
    Effect.gen(function* () {
      const node = yield* make
      const rec = yield* RecordingSink.make
      yield* node.execute(RunId.make("r1"), request("nope", "x"), rec.sink)
      expect(yield* rec.events).toEqual([{ _tag: "Failed", message: 'node n does not serve model "nope"' }])
    })
  )

  it.scoped("closing the run's scope stops it: no event after, and it no longer counts as active", () =>
    Effect.gen(function* () {
      const node = yield* make
      const rec = yield* RecordingSink.make
      const scope = yield* Scope.make()
      yield* node.execute(RunId.make("r1"), request("echo", "a long message to echo back slowly"), rec.sink).pipe(
        Scope.extend(scope)
      )
      yield* TestClock.adjust("25 millis")
      expect(yield* node.activeRuns).toBe(1)
      yield* Scope.close(scope, Exit.void)
      const seen = (yield* rec.events).length
      yield* TestClock.adjust("1 second")
      expect((yield* rec.events).length).toBe(seen)
      expect((yield* rec.events).some((e) => e._tag === "Complete")).toBe(false)
      expect(yield* node.activeRuns).toBe(0)
    })
  )
})
