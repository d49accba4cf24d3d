import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as JSONSchema from "effect/JSONSchema"
import * as Redacted from "effect/Redacted"
import { defaultConfig, EdgeConfigSchema } from "../../src/config/EdgeConfig.js"
import { applyOverrides, parseConfigText } from "../../src/config/loadConfig.js"
import { replicasOf } from "../../src/providers/ProviderConfig.js"

const errorOf = (text: string) => {
  const result = parseConfigText("edge.json", text)
  return Either.isLeft(result) ? result.left.message : "no error"
}

describe("config", () => {
  it("no file: the embedded default serves echo on 127.0.0.1:8080", () => {
    const c = defaultConfig()
    expect(c.server).toMatchObject({ host: "127.0.0.1", port: 8080, maxBodyBytes: 4194304, shutdownGraceMs: 10000 })
    expect(c.runs).toEqual({ idleTimeoutMs: 60000, wholeAnswerTimeoutMs: 600000, toolValidationAttempts: 2 })
    expect(c.models.map((m) => [m.id, m.provider.type])).toEqual([["echo", "echo"]])
  })

  it("the contract's example decodes, with defaults filled in and the API keys redacted", () => {
    const result = parseConfigText(
      "edge.json",
      JSON.stringify({
        server: { host: "127.0.0.1", port: 8080, apiKeys: ["sk-local-1"] },
        runs: { idleTimeoutMs: 60000, wholeAnswerTimeoutMs: 600000, toolValidationAttempts: 2 },
        models: [
          { id: "echo", provider: { type: "echo" } },
          {
            id: "qwen",
            provider: { type: "openai", baseUrl: "http://127.0.0.1:11434/v1", model: "qwen2.5:7b-instruct", apiKey: "optional" },
            tools: "native",
            output: { strict: false, streamBuffer: false, xmlCompletionTool: null }
          }
        ]
      })
    )
    const config = Either.getOrThrow(result)
    const key = config.server.apiKeys[0]!
    expect(Redacted.isRedacted(key) && Redacted.value(key)).toBe("sk-local-1")
    expect(String(key)).not.toContain("sk-local-1")
    const qwen = config.models[1]!
    expect(qwen.provider.type === "openai" && qwen.provider.model).toBe("qwen2.5:7b-instruct")
    expect(qwen.reasoning).toEqual({ implicitOpen: false, field: "reasoning_content" })
  })

  it("bad files name the file, the JSON path and what was expected", () => {
    expect(errorOf("{not json")).toMatch(/^edge\.json: not valid JSON/)
    expect(errorOf(JSON.stringify({ server: { prot: 1 } }))).toBe("edge.json: $.server.prot: unknown key (not allowed here)")
    expect(errorOf(JSON.stringify({ server: { port: "x" } }))).toMatch(/^edge\.json: \$\.server\.port: Expected/)
    expect(errorOf(JSON.stringify({ models: [{ provider: { type: "echo" } }] }))).toBe(
      "edge.json: $.models[0].id: missing (required)"
    )
    expect(errorOf(JSON.stringify({ models: [{ id: "a", provider: { type: "openai", baseUrl: 42 } }] }))).toMatch(
      /^edge\.json: \$\.models\[0\]\.provider/
    )
    expect(errorOf(JSON.stringify({ runs: { idleTimeoutMs: -1 } }))).toMatch(/\$\.runs\.idleTimeoutMs/)
    expect(
      errorOf(JSON.stringify({ models: [{ id: "a", provider: { type: "echo" } }, { id: "a", provider: { type: "echo" } }] }))
    ).toMatch(/duplicate model id "a"/)
  })

  it("bad files: small offending values are quoted, long ones and schema types are not (one short line)", () => {
    const long = "x".repeat(5000)
    const short = (text: string) => {
      const message = errorOf(text)
      expect(message.length, message.slice(0, 400)).toBeLessThanOrEqual(300)
      expect(message).not.toContain("x".repeat(50))
      expect(message).not.toContain("readonly")
      expect(message).not.toContain("<->")
      return message
    }
    expect(short(JSON.stringify({ log: { level: "verbose" } }))).toBe(
      'edge.json: $.log.level: Expected "debug" | "info" | "warn" | "error" | "none", actual "verbose"'
    )
    expect(short(JSON.stringify({ server: { host: 5 } }))).toBe("edge.json: $.server.host: Expected string, actual 5")
    expect(short(JSON.stringify({ server: { port: long } }))).toBe(
      "edge.json: $.server.port: Expected number, actual string of 5000 characters"
    )
    expect(short(JSON.stringify({ models: [{ id: "a", provider: long }] }))).toBe(
      "edge.json: $.models[0].provider: Expected object, actual string of 5000 characters"
    )
    expect(short(JSON.stringify({ models: { a: 1 } }))).toBe("edge.json: $.models: Expected array, actual object")
    expect(short(JSON.stringify({ server: { apiKeys: [5] } }))).toBe(
      "edge.json: $.server.apiKeys[0]: Expected string | object, actual 5"
    )
    // An object is never quoted: it may hold an API key.
    expect(short(JSON.stringify({ server: { apiKeys: [{ key: "sk-secret", nmae: "x" }] } }))).not.toContain("sk-secret")
    expect(short(JSON.stringify({ server: { [long]: 1 } }))).toMatch(/^edge\.json: \$\.server\["x+…"\]: unknown key/)
    // A message of the schema's own that quotes a value is clipped.
    const duplicate = errorOf(JSON.stringify({ models: [{ id: long, provider: { type: "echo" } }, { id: long, provider: { type: "echo" } }] }))
    expect(duplicate).toMatch(/^edge\.json: \$\.models\[1\]\.id: duplicate model id "x+…$/)
    expect(duplicate.length).toBeLessThanOrEqual(300)
  })

  it("flags override the file", () => {
    const c = applyOverrides(defaultConfig(), { host: "0.0.0.0", port: 9000, logLevel: "debug" })
    expect(c.server.host).toBe("0.0.0.0")
    expect(c.server.port).toBe(9000)
    expect(c.log.level).toBe("debug")
  })

  it("replicas: baseUrls (URLs or {url, name, slots, weight}), one way to the upstream, names made unique", () => {
    const model = (provider: object, more: object = {}) => JSON.stringify({ models: [{ id: "m", ...more, provider: { type: "openai", ...provider } }] })
    expect(errorOf(model({ baseUrl: "http://a/v1", baseUrls: ["http://b/v1"] }))).toBe(
      "edge.json: $.models[0].provider.baseUrls: set baseUrl (one upstream) or baseUrls (replicas), not both"
    )
    expect(errorOf(model({}))).toBe("edge.json: $.models[0].provider.baseUrl: is missing (or set baseUrls, for several replicas)")
    expect(errorOf(model({ baseUrls: [] }))).toMatch(/^edge\.json: \$\.models\[0\]\.provider\.baseUrls/)
    expect(errorOf(model({ baseUrls: [{ url: "http://a/v1", slots: 0 }] }))).toMatch(/\$\.models\[0\]\.provider\.baseUrls\[0\]/)
    expect(errorOf(model({ baseUrl: "http://a/v1" }, { routing: "sticky" }))).toMatch(/\$\.models\[0\]\.routing/)
    const parsed = parseConfigText("edge.json", model(
      { baseUrls: ["http://10.0.0.1:8080/v1", { url: "http://10.0.0.1:8080/v1", slots: 4 }, { url: "http://b:1/v1", name: "box2", weight: 2 }] },
      { routing: "least_busy" }
    ))
    const m = Either.getOrThrow(parsed).models[0]!
    expect(m.routing).toBe("least_busy")
    expect(m.provider.type === "openai" && replicasOf(m.provider)).toEqual([
      { url: "http://10.0.0.1:8080/v1", name: "10.0.0.1:8080#1", slots: undefined, weight: undefined },
      { url: "http://10.0.0.1:8080/v1", name: "10.0.0.1:8080#2", slots: 4, weight: undefined },
      { url: "http://b:1/v1", name: "box2", slots: undefined, weight: 2 }
    ])
  })

  it("the JSON Schema for editors can be generated", () => {
    const schema = JSONSchema.make(EdgeConfigSchema)
    expect(JSON.stringify(schema)).toContain("idleTimeoutMs")
  })
})
