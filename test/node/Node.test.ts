import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as Stream from "effect/Stream"
import { ModelConfig } from "../../src/config/EdgeConfig.js"
import * as Node from "../../src/node/Node.js"
import { NodeId, RunId } from "../../src/run/RunEvent.js"
import type { SubmitRunRequest } from "../../src/run/SubmitRunRequest.js"

const echo = Schema.decodeUnknownSync(ModelConfig)({ id: "echo", provider: { type: "echo", tokenDelayMs: 10 } })
const make = Node.make({ id: NodeId.make("n"), models: [echo], maxConcurrentRuns: 4 }).pipe(
  Effect.provide(NodeHttpClient.layerUndici)
)
const request = (model: string, text: string): SubmitRunRequest => ({
  model,
  messages: [{ role: "user", content: text }],
  tools: [],
  sampling: {},
  metadata: {}
})

describe("Node", () => {
  it.effect("executes a run with the model's provider", () =>
    Effect.gen(function* () {
      const node = yield* make
      const fiber = yield* Effect.fork(Stream.runCollect(node.execute(RunId.make("r1"), request("echo", "hi there"))))
      yield* TestClock.adjust("1 second")
      const events = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
      expect(events.map((e) => (e._tag === "Delta" ? e.text : e._tag))).toEqual(["hi", " the", "re", "Complete"])
    })
  )

  it.effect("an unknown model is a Failed event, not a crash", () =>
    Effect.gen(function* () {
      const node = yield* make
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(node.execute(RunId.make("r1"), request("nope", "x"))))
      expect(events).toEqual([{ _tag: "Failed", message: 'node n does not serve model "nope"' }])
    })
  )

  it.effect("cancelAll ends every active run with one Cancelled event", () =>
    Effect.gen(function* () {
      const node = yield* make
      const fiber = yield* Effect.fork(
        Stream.runCollect(node.execute(RunId.make("r1"), request("echo", "a long message to echo back slowly")))
      )
      yield* TestClock.adjust("25 millis")
      expect(yield* node.activeRuns).toBe(1)
      yield* node.cancelAll("edge shutting down")
      const events = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
      expect(events[events.length - 1]).toEqual({ _tag: "Cancelled", message: "edge shutting down" })
      expect(events.filter((e) => e._tag !== "Delta")).toHaveLength(1)
      expect(yield* node.activeRuns).toBe(0)
    })
  )
})
