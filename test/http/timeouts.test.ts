import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { connect } from "node:net"
import { nodeServerOptions } from "../../src/http/HttpLive.js"
import { edgeOnNodeServer, exchange, parseResponse, serverPort } from "./rawClient.js"

/*
 * These use real time: the timeouts are Node's own (its HTTP parser's timestamps and the
 * `connectionsCheckingInterval` timer run on libuv's clock), which TestClock cannot drive.
 * The timeouts are small and the bounds generous (3× the timeout), so only the enforcement
 * delay (Node's default check interval is 30 s) can make them fail.
 */

describe("slow clients", () => {
  it("the timeout check runs within a second of the configured timeouts", () => {
    const base = { keepAliveTimeout: 5_000 }
    expect(nodeServerOptions({ headersTimeoutMs: 10_000, requestTimeoutMs: 30_000 })).toEqual({
      ...base,
      headersTimeout: 10_000,
      requestTimeout: 30_000,
      connectionsCheckingInterval: 1_000
    })
    expect(nodeServerOptions({ headersTimeoutMs: 500, requestTimeoutMs: 2_000 }).connectionsCheckingInterval).toBe(125)
    expect(nodeServerOptions({ headersTimeoutMs: 1, requestTimeoutMs: 1 }).connectionsCheckingInterval).toBe(1)
  })

  it.scopedLive("half the headers then a stall: closed (408) within headersTimeoutMs + ~1 s, well before 3×", () =>
    Effect.gen(function* () {
      const port = yield* serverPort
      const result = yield* exchange(port, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty", {
        readWhileWriting: true,
        waitMs: 1_500
      })
      expect(result.closed).toBe(true)
      expect(result.elapsedMs).toBeGreaterThanOrEqual(450)
      expect(result.elapsedMs).toBeLessThan(1_500)
      expect(parseResponse(result.received).status).toBe(408)
    }).pipe(Effect.provide(edgeOnNodeServer({ headersTimeoutMs: 500, requestTimeoutMs: 800 })))
  , 20_000)

  it.scopedLive("headers then half the body and a stall: closed within requestTimeoutMs + ~1 s", () =>
    Effect.gen(function* () {
      const port = yield* serverPort
      const result = yield* exchange(
        port,
        'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":',
        { readWhileWriting: true, waitMs: 2_400 }
      )
      expect(result.closed).toBe(true)
      expect(result.elapsedMs).toBeGreaterThanOrEqual(750)
      expect(result.elapsedMs).toBeLessThan(2_400)
    }).pipe(Effect.provide(edgeOnNodeServer({ headersTimeoutMs: 500, requestTimeoutMs: 800 })))
  , 20_000)

  it.scopedLive("server.maxConnections: a connection over the cap is closed at once, the others are served", () =>
    Effect.gen(function* () {
      const port = yield* serverPort
      const open = yield* Effect.promise(() =>
        Promise.all(
          [1, 2].map(
            () =>
              new Promise<ReturnType<typeof connect>>((resolve) => {
                const s = connect({ host: "127.0.0.1", port }, () => resolve(s))
              })
          )
        )
      )
      yield* Effect.sleep("100 millis")
      const over = yield* Effect.fork(
        exchange(port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", { readWhileWriting: true, waitMs: 3_000 })
      )
      const refused = yield* Fiber.join(over)
      expect(refused.closed).toBe(true)
      expect(refused.received).toBe("")
      for (const s of open) s.destroy()
      yield* Effect.sleep("100 millis")
      const served = yield* exchange(port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", {
        readWhileWriting: true
      })
      expect(parseResponse(served.received).status).toBe(200)
    }).pipe(Effect.provide(edgeOnNodeServer({ maxConnections: 2 })))
  , 20_000)
})
