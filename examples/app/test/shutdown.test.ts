import { expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Scope from "effect/Scope"
import { ChatCompletions, Edge, LocalNode } from "iop-edge"
import { ScriptedProvider } from "iop-edge/testing"

// Composed into a larger graph, the edge shuts down with it: closing the graph's scope ends an open run (the
// provider sees its run cancelled) and the caller gets a typed failure, not a hang. `log.level: "none"` holds
// for the typed API as for the routes: nothing is logged.
it.live("closing the graph's scope cancels the open run and fails its caller with a typed error", () => {
  const lines: Array<unknown> = []
  const capture = Logger.replace(Logger.defaultLogger, Logger.make<unknown, void>(({ message }) => void lines.push(message)))
  return Effect.gen(function* () {
    const scripted = yield* ScriptedProvider.make
    const Graph = Edge.layerFrom({ metrics: Edge.layerMetricsTest, nodes: LocalNode.layerModel("slow", scripted.provider) }).pipe(
      Layer.provideMerge(Edge.layerEdgeConfig({ models: [], log: { level: "none" } }))
    )
    const scope = yield* Scope.make()
    const services = yield* Layer.buildWithScope(Graph, scope)
    const call = ChatCompletions.request({ model: "slow", messages: [{ role: "user", content: "hi" }] }).pipe(
      Effect.flatMap(ChatCompletions.create),
      Effect.provide(services)
    )
    const caller = yield* Effect.fork(call)
    const run = yield* scripted.nextRun
    yield* run.text("partial")
    yield* Scope.close(scope, Exit.void)
    yield* run.cancelled
    const failure = yield* Effect.flip(Fiber.join(caller))
    expect(failure._tag).toBe("RunFailed")
    expect(failure.message).toContain("node disconnected")
    expect(lines).toEqual([])
  }).pipe(Effect.provide(capture))
})
