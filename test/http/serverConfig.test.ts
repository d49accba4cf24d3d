import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as JSONSchema from "effect/JSONSchema"
import { RunFailed } from "../../src/chat/errors.js"
import { defaultConfig, EdgeConfigSchema } from "../../src/config/EdgeConfig.js"
import { parseConfigText } from "../../src/config/loadConfig.js"
import { HostNotAllowed, OriginNotAllowed, RateLimited, ShuttingDown } from "../../src/chat/EdgeError.js"
import { toHttpError } from "../../src/dialects/openaiError.js"
import { NodesAtCapacity, NodeUnavailable, NoNodeForModel } from "../../src/protocol/errors.js"
import { NodeId } from "../../src/protocol/RunEvent.js"

const errorOf = (server: unknown) => {
  const result = parseConfigText("edge.json", JSON.stringify({ server }))
  return Either.isLeft(result) ? result.left.message : "no error"
}

describe("server config: browsers, connections", () => {
  it("defaults: no origin allowed, no extra host, 10000 connections", () => {
    expect(defaultConfig().server).toMatchObject({ cors: { allowedOrigins: [] }, allowedHosts: [], maxConnections: 10_000 })
  })

  it("cors.allowedOrigins takes origins (scheme://host[:port]) and names the bad one", () => {
    const ok = parseConfigText("edge.json", JSON.stringify({ server: { cors: { allowedOrigins: ["https://app.example", "http://localhost:3000"] }, allowedHosts: ["edge.lan"], maxConnections: 5 } }))
    expect(Either.isRight(ok)).toBe(true)
    expect(errorOf({ cors: { allowedOrigins: ["https://app.example/path"] } })).toMatch(/^edge\.json: \$\.server\.cors\.allowedOrigins\[0\]: /)
    expect(errorOf({ cors: { allowedOrigins: ["app.example"] } })).toMatch(/\$\.server\.cors\.allowedOrigins\[0\]/)
    expect(errorOf({ cors: { origins: [] } })).toBe("edge.json: $.server.cors.origins: unknown key (not allowed here)")
    expect(errorOf({ allowedHosts: [""] })).toMatch(/\$\.server\.allowedHosts\[0\]/)
    expect(errorOf({ maxConnections: 0 })).toMatch(/\$\.server\.maxConnections/)
  })

  it("headersTimeoutMs over requestTimeoutMs is a config error (Node would throw at start)", () => {
    expect(errorOf({ headersTimeoutMs: 40_000 })).toMatch(/^edge\.json: \$\.server\.headersTimeoutMs: .*requestTimeoutMs/)
    expect(errorOf({ headersTimeoutMs: 40_000, requestTimeoutMs: 40_000 })).toBe("no error")
  })

  it("the JSON schema export still works and lists the new keys", () => {
    const schema = JSON.stringify(JSONSchema.make(EdgeConfigSchema))
    for (const key of ["cors", "allowedOrigins", "allowedHosts", "maxConnections"]) expect(schema).toContain(`"${key}"`)
  })
})

describe("status headers", () => {
  it("every 503 carries Retry-After: 1; 429 keeps it", () => {
    for (const e of [
      new ShuttingDown(),
      new NoNodeForModel({ model: "m" }),
      new NodesAtCapacity({ model: "m" }),
      new NodeUnavailable({ nodeId: NodeId.make("n"), reason: "gone" })
    ]) {
      const r = toHttpError(e)
      expect(r.status, e._tag).toBe(503)
      expect(r.headers?.["retry-after"], e._tag).toBe("1")
    }
    expect(toHttpError(new RateLimited({ scope: "edge", limit: 1 })).headers).toEqual({ "retry-after": "1" })
    expect(toHttpError(new RunFailed({ reason: "x" })).headers).toBeUndefined()
  })

  it("403 for a refused Host or Origin, naming it (clipped)", () => {
    const host = toHttpError(new HostNotAllowed({ host: "evil.example" }))
    expect(host).toMatchObject({ status: 403, body: { error: { type: "invalid_request_error", code: "host_not_allowed" } } })
    expect(host.body.error.message).toContain("evil.example")
    expect(host.body.error.message).toContain("server.allowedHosts")
    const origin = toHttpError(new OriginNotAllowed({ origin: `https://${"a".repeat(5000)}.example` }))
    expect(origin).toMatchObject({ status: 403, body: { error: { type: "invalid_request_error", code: "origin_not_allowed" } } })
    expect(origin.body.error.message.length).toBeLessThan(300)
  })
})
