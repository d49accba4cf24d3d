import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as JSONSchema from "effect/JSONSchema"
import { defaultConfig, EdgeConfigSchema } from "../../src/config/EdgeConfig.js"
import { parseConfigText } from "../../src/config/loadConfig.js"

const errorOf = (server: unknown) => {
  const result = parseConfigText("edge.json", JSON.stringify({ server }))
  return Either.isLeft(result) ? result.left.message : "no error"
}

describe("server config: connections", () => {
  it("defaults: 10000 connections", () => {
    expect(defaultConfig().server).toMatchObject({ maxConnections: 10_000 })
  })

  it("headersTimeoutMs over requestTimeoutMs is a config error (Node would throw at start)", () => {
    expect(errorOf({ headersTimeoutMs: 40_000 })).toMatch(/^edge\.json: \$\.server\.headersTimeoutMs: .*requestTimeoutMs/)
    expect(errorOf({ headersTimeoutMs: 40_000, requestTimeoutMs: 40_000 })).toBe("no error")
  })

  it("the JSON schema export still works and lists the new keys", () => {
    const schema = JSON.stringify(JSONSchema.make(EdgeConfigSchema))
    for (const key of ["maxConnections"]) expect(schema).toContain(`"${key}"`)
  })
})
