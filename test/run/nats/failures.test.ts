import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import type * as RunEvent from "../../../src/run/RunEvent.js"
import { type NatsServer, startNatsServer } from "../../support/natsServer.js"
import { busConfig, LONG_TEXT, makeEdge, makeNode, nodesOf, NODE_TIMEOUT_MS, request, waitFor } from "./harness.js"

let server: NatsServer
beforeAll(async () => {
  server = await startNatsServer()
})
afterAll(async () => {
  await server?.stop()
})

const deltaText = (events: ReadonlyArray<RunEvent.RunEvent>) =>
  events.map((e) => (e._tag === "Delta" ? e.text : "")).join("")

describe("NATS transport failures", () => {
  it.scopedLive("node killed (no NodeLeave): its run fails with NodeDisconnected within nodeTimeoutMs + 1 s", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url)
      const { node, conn } = yield* makeNode(bus, "doomed", { tokenDelayMs: 30 })
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      const handle = yield* edge.runs.submit(request(LONG_TEXT))
      const seen: Array<RunEvent.RunEvent> = []
      const fiber = yield* handle.events.pipe(
        Stream.runForEach((e) => Effect.sync(() => seen.push(e))),
        Effect.either,
        Effect.fork
      )
      yield* waitFor(Effect.sync(() => seen.length), (n) => n >= 2)
      // Like a crash: the socket goes away and no NodeLeave is sent.
      yield* Effect.promise(() => conn.client.close())
      const t0 = Date.now()
      const result = yield* Fiber.join(fiber)
      const elapsed = Date.now() - t0
      expect(Either.isLeft(result) && result.left._tag).toBe("NodeDisconnected")
      expect(elapsed).toBeLessThan(NODE_TIMEOUT_MS + 1000)
      expect(yield* nodesOf(edge)).toEqual([])
      expect(LONG_TEXT.startsWith(deltaText(seen))).toBe(true)
      // The node, cut off from its edge, stops the run too.
      yield* waitFor(node.activeRuns, (n) => n === 0, 2000)
    }))

  it.scopedLive("NATS server restart mid-run: the run fails cleanly, and a new run works after reconnection", () =>
    Effect.gen(function* () {
      const bus = busConfig(server.url)
      const { node } = yield* makeNode(bus, "n1", { tokenDelayMs: 30 })
      const edge = yield* makeEdge(bus, "e1")
      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1)
      const handle = yield* edge.runs.submit(request(LONG_TEXT))
      const seen: Array<RunEvent.RunEvent> = []
      const fiber = yield* handle.events.pipe(
        Stream.runForEach((e) => Effect.sync(() => seen.push(e))),
        Effect.either,
        Effect.fork
      )
      yield* waitFor(Effect.sync(() => seen.length), (n) => n >= 2)
      // Down for longer than nodeTimeoutMs: both sides must notice.
      yield* Effect.promise(() => server.restart(NODE_TIMEOUT_MS + 300))
      const result = yield* Fiber.join(fiber)
      const failedCleanly = Either.isLeft(result)
        ? result.left._tag === "NodeDisconnected"
        : seen.at(-1)?._tag === "Failed"
      expect(failedCleanly).toBe(true)
      expect(LONG_TEXT.startsWith(deltaText(seen))).toBe(true)
      yield* waitFor(node.activeRuns, (n) => n === 0, 3000)

      yield* waitFor(nodesOf(edge), (ids) => ids.length === 1, 5000)
      const again = yield* Effect.scoped(
        edge.runs.submit(request("back again")).pipe(
          Effect.flatMap((h) => Stream.runCollect(h.events)),
          Effect.map(Chunk.toReadonlyArray)
        )
      )
      expect(deltaText(again)).toBe("back again")
      expect(again.at(-1)?._tag).toBe("Complete")
    }))
})
