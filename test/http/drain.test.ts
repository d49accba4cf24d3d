import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { Agent, request, type Server } from "node:http"
import { connect, type Socket } from "node:net"
import * as Lifecycle from "../../src/http/Lifecycle.js"
import { edgeOnNodeServer, exchange, parseResponse, serverPort } from "./rawClient.js"

/** One request's outcome as a client sees it: a status (with its body's error type and Retry-After) or a socket error. */
type Outcome =
  | { readonly _tag: "Response"; readonly status: number; readonly type: string | undefined; readonly retryAfter: string | undefined }
  | { readonly _tag: "SocketError"; readonly code: string; readonly localPort: number | undefined }

const body = JSON.stringify({ model: "echo", messages: [{ role: "user", content: "one two three four" }] })

const post = (port: number, agent: Agent): Promise<Outcome> =>
  new Promise((resolve) => {
    let localPort: number | undefined
    const failed = (e: NodeJS.ErrnoException) => resolve({ _tag: "SocketError", code: e.code ?? e.message, localPort })
    const req = request(
      { host: "127.0.0.1", port, method: "POST", path: "/v1/chat/completions", agent, headers: { "content-type": "application/json" } },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("error", failed)
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8")
          let type: string | undefined
          try {
            type = (JSON.parse(text) as { error?: { type?: string } }).error?.type
          } catch {
            type = text === "" ? "<empty body>" : "<not json>"
          }
          resolve({ _tag: "Response", status: res.statusCode ?? 0, type, retryAfter: res.headers["retry-after"] })
        })
      }
    )
    req.on("socket", (socket) => {
      localPort = socket.localPort
      socket.once("connect", () => {
        localPort = socket.localPort
      })
    })
    req.on("error", failed)
    req.end(body)
  })

/**
 * `workers` keep-alive clients that post one request after another. A worker stops at its first 503, as a
 * load balancer takes a draining instance out of rotation (so new connections stop, and the listener can
 * close without cutting one in the kernel's accept queue), or at a socket error.
 */
const load = (port: number, workers: number) =>
  Effect.promise(async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: workers })
    const outcomes: Array<Outcome> = []
    await Promise.all(
      Array.from({ length: workers }, async () => {
        for (let i = 0; i < 10_000; i++) {
          const outcome = await post(port, agent)
          outcomes.push(outcome)
          if (outcome._tag === "SocketError" || outcome.status !== 200) return
        }
      })
    )
    agent.destroy()
    return outcomes
  })

/** Writes `first`, waits for `go`, writes `rest`, and reads until the server closes (or 5 s). */
const twoPartRequest = (port: number, first: string, go: Promise<void>, rest: string) =>
  Effect.promise(
    () =>
      new Promise<{ readonly received: string; readonly error: string | undefined }>((resolve) => {
        const chunks: Array<Buffer> = []
        let error: string | undefined
        const socket = connect({ host: "127.0.0.1", port }, () => {
          socket.write(first)
          void go.then(() => socket.write(rest))
        })
        const done = () => {
          clearTimeout(timer)
          resolve({ received: Buffer.concat(chunks).toString("utf8"), error })
        }
        const timer = setTimeout(() => {
          socket.destroy()
          done()
        }, 5_000)
        socket.on("data", (c: Buffer) => chunks.push(c))
        socket.on("error", (e: NodeJS.ErrnoException) => {
          error = e.code ?? e.message
        })
        socket.on("close", done)
      })
  )

describe("drain", () => {
  it.scoped("requests that arrive while draining are answered, not waited for: a steady stream of them cannot hold the drain", () =>
    Effect.gen(function* () {
      const lifecycle = yield* Lifecycle.make
      const before = yield* Scope.make()
      yield* lifecycle.track.pipe(Scope.extend(before))
      yield* lifecycle.startDraining
      expect(yield* lifecycle.draining).toBe(true)
      const during = yield* Scope.make()
      yield* lifecycle.track.pipe(Scope.extend(during))
      expect(yield* lifecycle.open).toBe(1)
      const idle = yield* Effect.fork(lifecycle.awaitIdle("1 second"))
      yield* Scope.close(before, Exit.void)
      expect(yield* Fiber.join(idle)).toBe(true)
      yield* Scope.close(during, Exit.void)
      expect(yield* lifecycle.open).toBe(0)
    })
  )

  it.live("SIGTERM under load: every request the edge accepted is served or answered 503 with a JSON body and Retry-After, none is reset", () =>
    Effect.gen(function* () {
      // The remote ports of the connections the edge accepted: a connection still in the kernel's accept queue when
      // the listener closes is reset by the kernel (no server can answer it), and is told apart by its port.
      const accepted = new Set<number>()
      const watch = (node: Server) => node.on("connection", (socket: Socket) => accepted.add(socket.remotePort ?? -1))
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(edgeOnNodeServer({ shutdownGraceMs: 2_000 }, 5, watch), scope)
      const port = yield* serverPort.pipe(Effect.provide(context))
      const running = yield* Effect.fork(load(port, 64))
      yield* Effect.sleep("500 millis")
      // SIGTERM: the process's scope closes.
      yield* Scope.close(scope, Exit.void)
      const outcomes = yield* Fiber.join(running)
      const served = outcomes.filter((o) => o._tag === "Response" && o.status === 200)
      const refused = outcomes.filter((o) => o._tag === "Response" && o.status === 503)
      const neverAccepted = (o: Outcome) =>
        o._tag === "SocketError" &&
        (o.code === "ECONNREFUSED" || (o.code === "ECONNRESET" && (o.localPort === undefined || !accepted.has(o.localPort))))
      const bad = outcomes.filter(
        (o) =>
          (o._tag === "SocketError" && !neverAccepted(o)) ||
          (o._tag === "Response" && o.status !== 200 && !(o.status === 503 && o.type === "service_unavailable" && o.retryAfter === "1"))
      )
      const summary = new Map<string, number>()
      for (const o of outcomes) {
        const key =
          o._tag === "Response" ? `${o.status} ${o.type} retry-after=${o.retryAfter}` : `${o.code}${neverAccepted(o) ? " (never accepted)" : ""}`
        summary.set(key, (summary.get(key) ?? 0) + 1)
      }
      expect(bad, JSON.stringify(Object.fromEntries(summary))).toEqual([])
      expect(served.length).toBeGreaterThan(0)
      expect(refused.length).toBeGreaterThan(0)
    })
  , 30_000)

  it.live("a request that arrives while draining is answered 503 with a body and Connection: close, not reset", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(edgeOnNodeServer({ shutdownGraceMs: 3_000 }, 50), scope)
      const port = yield* serverPort.pipe(Effect.provide(context))
      // A slow stream keeps the drain waiting.
      const stream = yield* Effect.fork(
        exchange(
          port,
          `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${
            Buffer.byteLength(body.replace("}]}", '}],"stream":true}'))
          }\r\nConnection: close\r\n\r\n${body.replace("}]}", '}],"stream":true}')}`,
          { readWhileWriting: true }
        )
      )
      yield* Effect.sleep("100 millis")
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* Effect.sleep("50 millis")
      const health = yield* exchange(port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", { readWhileWriting: true })
      expect(parseResponse(health.received).status).toBe(503)
      const late = yield* exchange(
        port,
        `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        { readWhileWriting: true, waitMs: 5_000 }
      )
      expect(late.readError).toBeUndefined()
      expect(late.closed).toBe(true)
      const response = parseResponse(late.received)
      expect(response.status).toBe(503)
      expect(response.headers["retry-after"]).toBe("1")
      expect(response.headers["connection"]).toBe("close")
      expect(JSON.parse(response.body)).toMatchObject({ error: { type: "service_unavailable" } })
      const streamed = yield* Fiber.join(stream)
      expect(streamed.received).toContain("data: [DONE]")
      yield* Fiber.join(closing)
    })
  , 30_000)

  it.live("a request still on its way when the drain ends is answered 503 before the connection closes, not cut", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(edgeOnNodeServer({ shutdownGraceMs: 3_000 }), scope)
      const port = yield* serverPort.pipe(Effect.provide(context))
      let go = () => {}
      const released = new Promise<void>((resolve) => {
        go = resolve
      })
      const head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      const client = yield* Effect.fork(
        twoPartRequest(port, head, released, `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
      )
      yield* Effect.sleep("100 millis")
      // Nothing is open: the drain ends at once; the connection (half its headers sent) is not idle.
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* Effect.sleep("300 millis")
      go()
      const result = yield* Fiber.join(client)
      yield* Fiber.join(closing)
      expect(result.error).toBeUndefined()
      const response = parseResponse(result.received)
      expect(response.status).toBe(503)
      expect(response.headers["retry-after"]).toBe("1")
      expect(response.headers["connection"]).toBe("close")
      expect(JSON.parse(response.body)).toMatchObject({ error: { type: "service_unavailable" } })
    })
  , 30_000)
})
