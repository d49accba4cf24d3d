import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Stream from "effect/Stream"
import { createServer } from "node:http"
import * as Edge from "../../src/Edge.js"
import * as LocalNode from "../../src/run/LocalNode.js"
import * as Provider from "../../src/providers/Provider.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"

/** A user's provider: answers every run with the model's name and the number of messages. */
const mine = LocalNode.layerModel(
  { id: "mine", aliases: ["my-alias"] },
  Provider.fromStream((request) =>
    Stream.make(
      RunEvent.delta(`mine saw ${request.messages.length} message(s)`),
      RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })
    )
  )
)

/** The user's app: its own route and middleware, the edge's routes beside them, its own server. */
const appWith = (config: Edge.EdgeConfigInput, cookie = false) =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const edgeRoutes = yield* Edge.routes
      const edgeMiddleware = yield* Edge.middleware
      const router = HttpRouter.empty.pipe(
        HttpRouter.get("/mine/hello", HttpServerResponse.text("hello from my app")),
        HttpRouter.concat(edgeRoutes)
      )
      const stamp = HttpMiddleware.make((app) =>
        Effect.map(app, (r) => {
          const stamped = HttpServerResponse.setHeader(r, "x-my-app", "1")
          return cookie ? HttpServerResponse.unsafeSetCookie(stamped, "seen", "1") : stamped
        }))
      return HttpServer.serve(stamp(edgeMiddleware(yield* HttpRouter.toHttpApp(router))))
    })
  ).pipe(
    Layer.provide(Edge.layerFrom({ metrics: Edge.layerMetricsTest, nodes: Layer.merge(Edge.layerEmbeddedNode, mine) })),
    Layer.provide(Edge.layerEdgeConfig(config)),
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
  )

const echo = { id: "echo", provider: { type: "echo" as const, tokenDelayMs: 0 } }
const App = appWith({ log: { level: "none" }, models: [echo] })

const base = Effect.map(HttpServer.HttpServer, (s) => (s.address._tag === "TcpAddress" ? `http://127.0.0.1:${s.address.port}` : ""))

const post = (url: string, body: unknown) =>
  Effect.promise(() =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }).then(
      async (r) => ({ status: r.status, headers: r.headers, body: (await r.json()) as Record<string, unknown> })
    )
  )

describe("the edge as a library", () => {
  it.scopedLive("routes mounted beside the app's own, under its middleware; its own provider answers its model by id and alias", () =>
    Effect.gen(function* () {
      const url = yield* base
      const own = yield* Effect.promise(() => fetch(`${url}/mine/hello`))
      expect(own.status).toBe(200)
      expect(yield* Effect.promise(() => own.text())).toBe("hello from my app")
      const answer = yield* post(`${url}/v1/chat/completions`, { model: "my-alias", messages: [{ role: "user", content: "hi" }] })
      expect(answer.status).toBe(200)
      expect(answer.headers.get("x-my-app")).toBe("1")
      expect(answer.headers.get("x-request-id")).not.toBeNull()
      expect(answer.body["model"]).toBe("my-alias")
      const choices = answer.body["choices"] as Array<{ message: { content: string } }>
      expect(choices[0]?.message.content).toBe("mine saw 1 message(s)")
      // The embedded node serves the config's model beside it; neither answers for the other.
      const echo = yield* post(`${url}/v1/chat/completions`, { model: "echo", messages: [{ role: "user", content: "hi" }] })
      expect((echo.body["choices"] as Array<{ message: { content: string } }>)[0]?.message.content).toBe("hi")
      const models = yield* Effect.promise(() => fetch(`${url}/v1/models`).then((r) => r.json() as Promise<{ data: Array<{ id: string }> }>))
      expect(models.data.map((m) => m.id).sort()).toEqual(["echo", "mine", "my-alias"])
      // No catch-all of the edge's: the app's server answers what no route serves (the platform's 404).
      const missing = yield* Effect.promise(() => fetch(`${url}/nowhere`))
      expect(missing.status).toBe(404)
    }).pipe(Effect.provide(App)))

  it.scopedLive("a streamed answer is written after the app's middleware: its headers arrive, and a client that leaves mid-stream leaves the server well", () =>
    Effect.gen(function* () {
      const url = yield* base
      const ask = (content: string) =>
        fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "echo", stream: true, messages: [{ role: "user", content }] })
        })
      const streamed = yield* Effect.promise(() => ask("one two three"))
      expect(streamed.status).toBe(200)
      expect(streamed.headers.get("content-type")).toBe("text/event-stream")
      expect(streamed.headers.get("x-my-app")).toBe("1")
      expect(streamed.headers.get("x-request-id")).not.toBeNull()
      const text = yield* Effect.promise(() => streamed.text())
      expect(text.endsWith("data: [DONE]\n\n")).toBe(true)
      // A client that reads one chunk and leaves; the next request is answered in full.
      const left = yield* Effect.promise(() => ask("a b c d e f g h"))
      const reader = left.body?.getReader()
      yield* Effect.promise(() => reader?.read() ?? Promise.resolve(undefined))
      yield* Effect.promise(() => reader?.cancel() ?? Promise.resolve())
      const after = yield* Effect.promise(() => ask("again"))
      expect((yield* Effect.promise(() => after.text())).endsWith("data: [DONE]\n\n")).toBe(true)
    }).pipe(Effect.provide(App)))

  it.scopedLive("a streamed answer the app set a cookie on is written by the server, cookie included", () =>
    Effect.gen(function* () {
      const url = yield* base
      const streamed = yield* Effect.promise(() =>
        fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "echo", stream: true, messages: [{ role: "user", content: "hi there" }] })
        }))
      expect(streamed.headers.get("set-cookie")).toContain("seen=1")
      expect(streamed.headers.get("x-my-app")).toBe("1")
      expect((yield* Effect.promise(() => streamed.text())).endsWith("data: [DONE]\n\n")).toBe(true)
    }).pipe(Effect.provide(appWith({ log: { level: "none" }, models: [echo] }, true))))

  it.effect("Edge.layer decodes a config written in code and names the bad field", () =>
    Effect.gen(function* () {
      const error = yield* Layer.build(Edge.layer({ runs: { idleTimeoutMs: -1 } })).pipe(Effect.scoped, Effect.flip)
      expect(error._tag).toBe("InvalidConfig")
      expect(error.message).toContain("runs.idleTimeoutMs")
    }))

  const loggedAt = (level: "info" | "none"): Effect.Effect<Array<unknown>, unknown> =>
    Effect.gen(function* () {
      const lines: Array<unknown> = []
      const capture = Logger.replace(Logger.defaultLogger, Logger.make<unknown, void>(({ message }) => void lines.push(message)))
      yield* Effect.gen(function* () {
        const url = yield* base
        expect((yield* post(`${url}/v1/chat/completions`, { model: "mine", messages: [{ role: "user", content: "hi" }] })).status).toBe(200)
      }).pipe(Effect.provide(appWith({ log: { level }, models: [] }).pipe(Layer.provide(capture))), Effect.scoped)
      return lines.flatMap((m): Array<unknown> => (Array.isArray(m) ? m : [m]))
    })

  it.live("log.level is honoured by the library's layers: info logs the run and the request, none writes nothing", () =>
    Effect.gen(function* () {
      expect(yield* loggedAt("info")).toEqual(expect.arrayContaining(["run finished", "http request"]))
      expect(yield* loggedAt("none")).toEqual([])
    }))
})
