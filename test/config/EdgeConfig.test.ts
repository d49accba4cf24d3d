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
    expect(c.runs).toEqual({ idleTimeoutMs: 60000, wholeAnswerTimeoutMs: 600000, toolValidationAttempts: 2, reasoningMemory: { maxTurns: 10000, maxChars: 16000000 } })
    expect(c.models.map((m) => [m.id, m.provider.type])).toEqual([["echo", "echo"]])
  })

  it("the contract's example decodes, with defaults filled in and the API keys redacted", () => {
    const result = parseConfigText(
      "edge.json",
      JSON.stringify({
        server: { host: "127.0.0.1", port: 8080, apiKeys: ["sk-local-1"] },
        runs: { idleTimeoutMs: 60000, wholeAnswerTimeoutMs: 600000, toolValidationAttempts: 2, reasoningMemory: { maxTurns: 10000, maxChars: 16000000 } },
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
    expect(qwen.reasoning).toEqual({ implicitOpen: false, field: "reasoning_content", continuity: false })
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

  it("run bounds: none by default; the edge's in `runs`, a model's own in `models[].runs` (null: none)", () => {
    const result = parseConfigText("edge.json", JSON.stringify({
      runs: { firstTokenTimeoutMs: 30000, maxRunMs: 600000 },
      models: [
        { id: "a", provider: { type: "echo" } },
        { id: "b", provider: { type: "echo" }, runs: { firstTokenTimeoutMs: 120000, maxRunMs: null } }
      ]
    }))
    const c = Either.getOrThrow(result)
    expect([c.runs.firstTokenTimeoutMs, c.runs.maxRunMs]).toEqual([30000, 600000])
    expect(c.models.map((m) => m.runs)).toEqual([undefined, { firstTokenTimeoutMs: 120000, maxRunMs: null }])
    expect(defaultConfig().models[0]?.runs).toBeUndefined()
    expect(errorOf(JSON.stringify({ runs: { firstTokenTimeoutMs: 0 } }))).toMatch(/^edge\.json: \$\.runs\.firstTokenTimeoutMs: /)
    expect(errorOf(JSON.stringify({ models: [{ id: "a", provider: { type: "echo" }, runs: { maxRunMs: 1.5 } }] }))).toMatch(
      /^edge\.json: \$\.models\[0\]\.runs\.maxRunMs: /
    )
    expect(errorOf(JSON.stringify({ models: [{ id: "a", provider: { type: "echo" }, runs: { idleTimeoutMs: 5 } }] }))).toBe(
      "edge.json: $.models[0].runs.idleTimeoutMs: unknown key (not allowed here)"
    )
  })

  it("responses.store: in memory by default; nats and none by kind; bad values name the field", () => {
    expect(defaultConfig().responses.store).toEqual({ kind: "memory", maxResponses: 10_000, maxBytes: 134_217_728, ttlMs: 86_400_000 })
    const decoded = (responses: unknown) => Either.getOrThrow(parseConfigText("edge.json", JSON.stringify({ responses }))).responses.store
    expect(decoded({ store: { kind: "memory", maxResponses: 5, ttlMs: 1000 } })).toEqual({ kind: "memory", maxResponses: 5, maxBytes: 134_217_728, ttlMs: 1000 })
    expect(decoded({ store: { kind: "nats" } })).toEqual({ kind: "nats", bucket: "iop_responses", ttlMs: 86_400_000 })
    expect(decoded({ store: { kind: "nats", bucket: "conv", nats: { servers: ["nats://10.0.0.1:4222"] } } })).toMatchObject({
      bucket: "conv",
      nats: { servers: ["nats://10.0.0.1:4222"], subjectPrefix: "iop" }
    })
    expect(decoded({ store: { kind: "none" } })).toEqual({ kind: "none" })
    expect(errorOf(JSON.stringify({ responses: { store: { kind: "memory", maxResponses: 0 } } }))).toMatch(
      /^edge\.json: \$\.responses\.store\.maxResponses: /
    )
    expect(errorOf(JSON.stringify({ responses: { store: { kind: "nats", bucket: "a.b" } } }))).toMatch(
      /^edge\.json: \$\.responses\.store\.bucket: .*key-value bucket/
    )
    expect(errorOf(JSON.stringify({ responses: { store: { kind: "redis" } } }))).toMatch(/^edge\.json: \$\.responses\.store\.kind: /)
    expect(errorOf(JSON.stringify({ responses: { store: { kind: "none", ttlMs: 5 } } }))).toMatch(/^edge\.json: \$\.responses\.store\.ttlMs: unknown key/)
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
