/**
 * `iop-edge/nats` as a library user meets it: a node serving a provider of its own, configured with `Edge.layer`'s
 * input shape, and an edge that finds it on a real `nats-server` and answers through it.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { ChatCompletions, Edge, Provider, RunEvent } from "../../src/index.js"
import { layerEdge, layerNode } from "../../src/nats.js"
import { startNatsServer, type NatsServer } from "../support/natsServer.js"

let nats: NatsServer | undefined
beforeAll(async () => {
  nats = await startNatsServer()
})
afterAll(async () => {
  await nats?.stop()
})

const shout = Provider.fromStream((request) => {
  const last = request.messages.at(-1)?.content
  return Stream.make(
    RunEvent.delta((typeof last === "string" ? last : "").toUpperCase()),
    RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })
  )
})

describe("iop-edge/nats", () => {
  it.live("layerNode serves a provider of your own to an edge on the bus, configured as the edge is", () =>
    Effect.gen(function* () {
      const bus = { nats: { servers: [nats?.url ?? ""] as const } }
      const node = layerNode(
        { bus, node: { id: "gpu-1" }, log: { level: "none" } },
        { providers: [{ model: { id: "shout", aliases: ["loud"] }, provider: shout }] }
      )
      const edge = Edge.layerFrom({ metrics: Edge.layerMetricsTest, nodes: layerEdge }).pipe(
        Layer.provideMerge(Edge.layerEdgeConfig({ bus, log: { level: "none" }, models: [] }))
      )
      const answer = yield* Effect.gen(function* () {
        const request = yield* ChatCompletions.request({ model: "loud", messages: [{ role: "user", content: "hi there" }] })
        return yield* ChatCompletions.create(request)
        // The node is found once it announces itself: until then the model is not served.
      }).pipe(Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("10 seconds"))), Effect.provide(Layer.merge(edge, node)))
      expect(answer.choices[0]?.message.content).toBe("HI THERE")
      expect(answer.model).toBe("shout")
    }))

  it.effect("layerNode names what its config lacks", () =>
    Effect.gen(function* () {
      const noBus = yield* Layer.build(layerNode({ node: { id: "n" } })).pipe(Effect.scoped, Effect.flip)
      expect(noBus).toMatchObject({ _tag: "InvalidConfig" })
      expect(noBus.message).toContain("$.bus")
      const badNode = yield* Layer.build(layerNode({ bus: {}, node: { id: "a.b" } })).pipe(Effect.scoped, Effect.flip)
      expect(badNode.message).toContain("node.id")
    }))
})
