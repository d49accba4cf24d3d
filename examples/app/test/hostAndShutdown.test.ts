import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { Edge, LocalNode } from "iop-edge"
import { ScriptedProvider } from "iop-edge/testing"
import * as http from "node:http"
import { createServer } from "node:http"
import { app, AppLive } from "../src/app.js"

const Served = AppLive.pipe(Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })))
const portOf = Effect.map(HttpServer.HttpServer, (s) => (s.address._tag === "TcpAddress" ? s.address.port : 0))

/** A GET with the Host header a browser or proxy would send (fetch cannot set it). */
const get = (port: number, path: string, host: string) =>
  Effect.async<number>((resume) => {
    const request = http.get({ host: "127.0.0.1", port, path, headers: { host } }, (response) => {
      response.resume()
      response.on("end", () => resume(Effect.succeed(response.statusCode ?? 0)))
    })
    request.on("error", (e) => resume(Effect.die(e)))
  })

it.scopedLive("behind the Host the app chose: its routes and the edge's answer; the edge refuses a Host it does not know, the app's route does not care", () =>
  Effect.gen(function* () {
    const port = yield* portOf
    expect(yield* get(port, "/hello", "app.example.com")).toBe(200)
    expect(yield* get(port, "/v1/models", "app.example.com")).toBe(200)
    expect(yield* get(port, "/v1/models", "elsewhere.example")).toBe(403)
    expect(yield* get(port, "/hello", "elsewhere.example")).toBe(200)
  }).pipe(Effect.provide(Served)))

it.live("shut down with a stream open: the run is cancelled after server.shutdownGraceMs and the client reads its end", () =>
  Effect.gen(function* () {
    const scripted = yield* ScriptedProvider.make
    const Graph = Layer.unwrapEffect(Effect.map(app, (a) => HttpServer.serve(a))).pipe(
      Layer.provide(Edge.layerFrom({ metrics: Edge.layerMetricsTest, nodes: LocalNode.layerModel("slow", scripted.provider) })),
      Layer.provide(Edge.layerEdgeConfig({ models: [], log: { level: "none" }, server: { shutdownGraceMs: 100 } })),
      Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
    )
    const scope = yield* Scope.make()
    const port = yield* Effect.provide(portOf, yield* Layer.buildWithScope(Graph, scope))
    // The answer's headers wait for the run's first token: asked first, read once the run has said something.
    const asking = fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "slow", stream: true, messages: [{ role: "user", content: "hi" }] })
    })
    const run = yield* scripted.nextRun
    yield* run.text("partial")
    const response = yield* Effect.promise(() => asking)
    const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
    const body = yield* Effect.promise(() => response.text())
    yield* Fiber.join(closing)
    yield* run.cancelled
    expect(body).toContain("partial")
    expect(body).toContain("edge shutting down")
    expect(body.trimEnd().endsWith("data: [DONE]")).toBe(true)
  }))
