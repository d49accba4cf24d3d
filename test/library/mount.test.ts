import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as HashMap from "effect/HashMap"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Logger from "effect/Logger"
import * as Stream from "effect/Stream"
import * as http from "node:http"
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

/** The user's app: its own route and middleware, the edge's routes (their middleware on them) beside them, its own server. */
const appWith = (config: Edge.EdgeConfigInput, cookie = false) =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const edgeRoutes = yield* Edge.routes
      const router = HttpRouter.empty.pipe(
        HttpRouter.get("/mine/hello", HttpServerResponse.text("hello from my app")),
        HttpRouter.concat(edgeRoutes)
      )
      const stamp = HttpMiddleware.make((app) =>
        Effect.map(app, (r) => {
          const stamped = HttpServerResponse.setHeader(r, "x-my-app", "1")
          return cookie ? HttpServerResponse.unsafeSetCookie(stamped, "seen", "1") : stamped
        }))
      return HttpServer.serve(stamp(yield* HttpRouter.toHttpApp(router)))
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

  /** A request with the Host and headers a browser behind the app's reverse proxy would send. */
  const raw = (url: string, options: { method: string; path: string; headers: Record<string, string> }) =>
    Effect.async<{ status: number; headers: http.IncomingHttpHeaders }>((resume) => {
      const { port } = new URL(url)
      const request = http.request({ host: "127.0.0.1", port, method: options.method, path: options.path, headers: options.headers }, (response) => {
        response.resume()
        response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, headers: response.headers })))
      })
      request.end()
    })

  it.scopedLive("the edge's Host, Origin and CORS policy is its routes' own: the app's routes answer as if the edge were not mounted", () =>
    Effect.gen(function* () {
      const url = yield* base
      const proxied = { host: "myapp.example.com", origin: "https://elsewhere.example" }
      // The app's own route, behind a Host the edge does not allow and with an Origin it does not know: the app's answer.
      const own = yield* raw(url, { method: "GET", path: "/mine/hello", headers: proxied })
      expect(own.status).toBe(200)
      expect(own.headers["x-request-id"]).toBeUndefined()
      expect(own.headers["access-control-allow-origin"]).toBeUndefined()
      // The edge's routes keep their policy: the Host is refused there, by name.
      const edge = yield* raw(url, { method: "GET", path: "/v1/models", headers: proxied })
      expect(edge.status).toBe(403)
      // A preflight of an edge route from an allowed origin is the edge's; of the app's route, the app's (no CORS).
      const allowed = { host: "127.0.0.1", origin: "https://app.example", "access-control-request-method": "POST" }
      const preflight = yield* raw(url, { method: "OPTIONS", path: "/v1/chat/completions", headers: allowed })
      expect(preflight.status).toBe(204)
      expect(preflight.headers["access-control-allow-origin"]).toBe("https://app.example")
      const appPreflight = yield* raw(url, { method: "OPTIONS", path: "/mine/hello", headers: allowed })
      expect(appPreflight.headers["access-control-allow-origin"]).toBeUndefined()
    }).pipe(Effect.provide(appWith({ log: { level: "none" }, server: { cors: { allowedOrigins: ["https://app.example"] } }, models: [echo] }))))

  it.live("closing an app that mounts the routes cancels its open streams (after server.shutdownGraceMs): nothing waits for the idle timeout", () =>
    Effect.gen(function* () {
      // A model that says one word and then nothing, under the default idle timeout (60 s, past the test's timeout).
      const silent = LocalNode.layerModel({ id: "silent" }, Provider.fromStream(() => Stream.concat(Stream.make(RunEvent.delta("first")), Stream.never)))
      const served = Layer.unwrapEffect(Effect.gen(function* () {
        const router = HttpRouter.empty.pipe(HttpRouter.concat(yield* Edge.routes))
        return HttpServer.serve(yield* HttpRouter.toHttpApp(router))
      })).pipe(
        Layer.provide(Edge.layerFrom({ metrics: Edge.layerMetricsTest, nodes: silent })),
        Layer.provide(Edge.layerEdgeConfig({ log: { level: "none" }, server: { shutdownGraceMs: 50 }, models: [] })),
        Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
      )
      const scope = yield* Scope.make()
      const url = yield* Effect.provide(base, yield* Layer.buildWithScope(served, scope))
      const response = yield* Effect.promise(() =>
        fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "silent", stream: true, messages: [{ role: "user", content: "hi" }] })
        }))
      const reader = response.body?.getReader()
      const first = yield* Effect.promise(() => reader?.read() ?? Promise.resolve(undefined))
      expect(new TextDecoder().decode(first?.value)).toContain("first")
      // The app closes with the stream open: the run is cancelled and the caller reads its terminal event.
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      let rest = ""
      for (;;) {
        const chunk = yield* Effect.promise(() => reader?.read() ?? Promise.resolve(undefined))
        if (chunk === undefined || chunk.done === true) break
        rest += new TextDecoder().decode(chunk.value)
      }
      yield* Fiber.join(closing)
      expect(rest).toContain("edge shutting down")
      expect(rest.endsWith("data: [DONE]\n\n")).toBe(true)
    }))

  /** What the edge logged behind a web handler (a streamed and a whole answer), and whether each line had its request id. */
  const loggedBehindWebHandler = (level: "info" | "none") =>
    Effect.gen(function* () {
      const lines: Array<{ message: unknown; requestId: boolean }> = []
      const capture = Logger.replace(Logger.defaultLogger, Logger.make<unknown, void>(({ annotations, message }) =>
        void lines.push({ message, requestId: HashMap.has(annotations, "request_id") })))
      const { dispose, handler } = HttpApp.toWebHandlerLayerWith(Layer.merge(Edge.layer({ log: { level }, models: [echo] }), capture), {
        toHandler: (runtime) => Effect.provide(Edge.httpApp, runtime)
      })
      for (const stream of [true, false]) {
        const response = yield* Effect.promise(() =>
          handler(new Request("http://localhost/v1/chat/completions", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ model: "echo", stream, messages: [{ role: "user", content: "hi there" }] })
          })))
        yield* Effect.promise(() => response.text())
      }
      yield* Effect.promise(() => dispose())
      return lines.filter((l) => l.message !== "draining" && l.message !== "stopped")
    })

  it.live("log.level holds behind a web handler too: a streamed answer's lines (written when its body ends) at the config's level, with the request's id", () =>
    Effect.gen(function* () {
      const info = yield* loggedBehindWebHandler("info")
      const messages = info.flatMap((l): Array<unknown> => (Array.isArray(l.message) ? l.message : [l.message]))
      expect(messages.filter((m) => m === "http request")).toHaveLength(2)
      expect(messages.filter((m) => m === "run finished")).toHaveLength(2)
      expect(info.every((l) => l.requestId)).toBe(true)
      expect(yield* loggedBehindWebHandler("none")).toEqual([])
    }))

  it.live("log.level is honoured by the library's layers: info logs the run and the request, none writes nothing", () =>
    Effect.gen(function* () {
      expect(yield* loggedAt("info")).toEqual(expect.arrayContaining(["run finished", "http request"]))
      expect(yield* loggedAt("none")).toEqual([])
    }))
})
