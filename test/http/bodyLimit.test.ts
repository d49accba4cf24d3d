import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { discardBudget, planUnread } from "../../src/http/unreadBody.js"
import { edgeOnNodeServer, exchange, parseResponse, serverPort } from "./rawClient.js"

const MiB = 1024 * 1024

const chatBody = (bytes: number): Buffer => {
  const prefix = '{"model":"echo","messages":[{"role":"user","content":"'
  const suffix = '"}]}'
  return Buffer.from(prefix + "a".repeat(bytes - prefix.length - suffix.length) + suffix)
}

const withLength = (body: Buffer): Buffer =>
  Buffer.concat([
    Buffer.from(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`
    ),
    body
  ])

const chunked = (body: Buffer, chunk = 64 * 1024): Buffer => {
  const parts: Array<Buffer> = [
    Buffer.from(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
  ]
  for (let i = 0; i < body.length; i += chunk) {
    const part = body.subarray(i, i + chunk)
    parts.push(Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from("\r\n"))
  }
  parts.push(Buffer.from("0\r\n\r\n"))
  return Buffer.concat(parts)
}

const expect413 = (raw: string) => {
  const response = parseResponse(raw)
  expect(response.status).toBe(413)
  expect(response.headers["connection"]).toBe("close")
  expect(Number(response.headers["content-length"])).toBe(Buffer.byteLength(response.body))
  expect(JSON.parse(response.body)).toMatchObject({
    error: { type: "invalid_request_error", code: "request_too_large" }
  })
}

describe("what to do with an unread body", () => {
  const limit = 4 * MiB
  const plan = (headers: Record<string, string>, complete: boolean) => planUnread({ headers, complete, maxBodyBytes: limit })

  it("the discard budget is 16× the limit, at least 64 MiB", () => {
    expect(discardBudget(4 * MiB)).toBe(64 * MiB)
    expect(discardBudget(64 * 1024)).toBe(64 * MiB)
    expect(discardBudget(16 * MiB)).toBe(256 * MiB)
  })

  it.each([
    ["read to its end", { "content-length": "100" }, true, "Keep"],
    ["no body", {}, false, "Keep"],
    ["an empty body", { "content-length": "0" }, false, "Keep"],
    ["a malformed length (Node refuses it first)", { "content-length": "x" }, false, "Keep"],
    ["a declared body not read", { "content-length": String(5 * MiB) }, false, "Discard"],
    ["a declared body, at the budget", { "content-length": String(64 * MiB) }, false, "Discard"],
    ["a declared body over the budget", { "content-length": String(64 * MiB + 1) }, false, "Close"],
    ["a chunked body not read to its end", { "transfer-encoding": "chunked" }, false, "Discard"],
    ["a chunked body read to its end", { "transfer-encoding": "chunked" }, true, "Keep"]
  ] as const)("%s → %s", (_, headers, complete, tag) => {
    const p = plan(headers, complete)
    expect(p._tag).toBe(tag)
    if (p._tag === "Discard") expect(p.maxBytes).toBe(64 * MiB)
  })
})

describe("413 reaches the client", () => {
  it.scopedLive("a 5 MiB body with Content-Length: the client writes all of it, then reads the whole 413, then the close", () =>
    Effect.gen(function* () {
      const port = yield* serverPort
      const result = yield* exchange(port, withLength(chatBody(5 * MiB)))
      expect(result.writeError).toBeUndefined()
      expect(result.readError).toBeUndefined()
      expect(result.closed).toBe(true)
      expect413(result.received)
    }).pipe(Effect.provide(edgeOnNodeServer()))
  , 30_000)

  it.scopedLive("a 5 MiB chunked body: the same 413 and close, once the limit is passed", () =>
    Effect.gen(function* () {
      const port = yield* serverPort
      const result = yield* exchange(port, chunked(chatBody(5 * MiB)))
      expect(result.writeError).toBeUndefined()
      expect(result.readError).toBeUndefined()
      expect(result.closed).toBe(true)
      expect413(result.received)
    }).pipe(Effect.provide(edgeOnNodeServer()))
  , 30_000)

  it.scopedLive("a client that reads while it writes sees the 413 before it has sent the body", () =>
    Effect.gen(function* () {
      const port = yield* serverPort
      const result = yield* exchange(port, withLength(chatBody(5 * MiB)), { readWhileWriting: true })
      expect(result.answeredWhileWriting).toBe(true)
      expect(result.writeError).toBeUndefined()
      expect413(result.received)
    }).pipe(Effect.provide(edgeOnNodeServer()))
  , 30_000)

  it.scopedLive("the discard is bounded: a declared 1 GiB body is answered and the connection closed, not read", () =>
    Effect.gen(function* () {
      const port = yield* serverPort
      const head = Buffer.from(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${1024 * MiB}\r\n\r\n`
      )
      const result = yield* exchange(port, head, { readWhileWriting: true, waitMs: 5_000 })
      expect(result.closed).toBe(true)
      expect413(result.received)
    }).pipe(Effect.provide(edgeOnNodeServer()))
  , 30_000)

  // A client that sends its whole body before it reads (as many HTTP clients do for a buffered body): every try
  // reads the complete 413, then the close; never EPIPE or ECONNRESET. Repeated, since a reset is a race.
  for (const [size, tries] of [[10 * MiB, 20], [50 * MiB, 20]] as const) {
    it.scopedLive(`a ${size / MiB} MiB body with Content-Length, sent whole before reading, ${tries} times: always the 413`, () =>
      Effect.gen(function* () {
        const port = yield* serverPort
        const request = withLength(chatBody(size))
        for (let i = 0; i < tries; i++) {
          const result = yield* exchange(port, request, { waitMs: 60_000 })
          expect(result.writeError, `try ${i}`).toBeUndefined()
          expect(result.readError, `try ${i}`).toBeUndefined()
          expect(result.closed, `try ${i}`).toBe(true)
          expect413(result.received)
        }
      }).pipe(Effect.provide(edgeOnNodeServer())), 240_000)

    it.scopedLive(`a ${size / MiB} MiB chunked body, sent whole before reading, 5 times: always the 413`, () =>
      Effect.gen(function* () {
        const port = yield* serverPort
        const request = chunked(chatBody(size))
        for (let i = 0; i < 5; i++) {
          const result = yield* exchange(port, request, { waitMs: 60_000 })
          expect(result.writeError, `try ${i}`).toBeUndefined()
          expect(result.readError, `try ${i}`).toBeUndefined()
          expect(result.closed, `try ${i}`).toBe(true)
          expect413(result.received)
        }
      }).pipe(Effect.provide(edgeOnNodeServer())), 240_000)
  }

  it.scopedLive("under the limit: keep-alive is kept and the request is served", () =>
    Effect.gen(function* () {
      const port = yield* serverPort
      const result = yield* exchange(port, withLength(chatBody(64 * 1024)), { readWhileWriting: true, waitMs: 3_000 })
      const response = parseResponse(result.received)
      expect(response.status).toBe(200)
      expect(response.headers["connection"]).toBe("keep-alive")
    }).pipe(Effect.provide(edgeOnNodeServer()))
  , 30_000)
})
