import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { defaultConfig, type EdgeConfigShape } from "../../../src/config/EdgeConfig.js"
import { parseConfigText } from "../../../src/config/loadConfig.js"
import { toHttpError } from "../../../src/dialects/openaiError.js"
import { decodeBody, resolveChatRequest } from "../../../src/dialects/chat-completions/request.js"

const tool = (name: string, parameters: object) => ({ type: "function", function: { name, parameters } })
/** A schema whose JSON is exactly `bytes` bytes (an ASCII description pads it). */
const schemaOf = (bytes: number) => {
  const empty = JSON.stringify({ type: "object", description: "" }).length
  return { type: "object", description: "d".repeat(bytes - empty) }
}

const submit = (config: EdgeConfigShape, tools: ReadonlyArray<object>) =>
  Effect.gen(function* () {
    const wire = yield* decodeBody(JSON.stringify({ model: "echo", messages: [{ role: "user", content: "x" }], tools }))
    return yield* resolveChatRequest(config, wire)
  }).pipe(Effect.either)

describe("tool schema size cap (runs.maxToolSchemaBytes)", () => {
  it.effect("by default a tool's parameters may be 262144 bytes of JSON, not one more: 400 naming the field", () =>
    Effect.gen(function* () {
      const config = defaultConfig()
      expect(config.runs.maxToolSchemaBytes).toBeUndefined()
      const small = tool("small", { type: "object" })
      const ok = yield* submit(config, [small, tool("at_limit", schemaOf(262_144))])
      expect(Either.isRight(ok)).toBe(true)

      const over = yield* submit(config, [small, small, small, tool("big", schemaOf(262_145))])
      expect(Either.isLeft(over)).toBe(true)
      if (Either.isRight(over)) return
      const { status, body } = toHttpError(over.left)
      expect(status).toBe(400)
      expect(body).toMatchObject({
        error: {
          type: "invalid_request_error",
          param: "tools[3].function.parameters",
          message: "tools[3].function.parameters: the schema is 262145 bytes, more than 262144"
        }
      })
    }))

  it.effect("counts bytes, not characters, and follows the configured limit", () =>
    Effect.gen(function* () {
      const parsed = parseConfigText("edge.json", JSON.stringify({ runs: { maxToolSchemaBytes: 100 } }))
      expect(Either.isRight(parsed)).toBe(true)
      if (Either.isLeft(parsed)) return
      const config = parsed.right
      expect(config.runs.maxToolSchemaBytes).toBe(100)
      // {"description":"…"} around 41 two-byte characters and an "a": 101 bytes, 60 characters.
      const over = yield* submit(config, [tool("t", { description: `${"é".repeat(41)}a` })])
      expect(Either.isLeft(over) && over.left.message).toBe(
        "tools[0].function.parameters: the schema is 101 bytes, more than 100"
      )
      expect(Either.isRight(yield* submit(config, [tool("t", { description: "é".repeat(41) })]))).toBe(true)
      expect(Either.isRight(yield* submit(config, [{ type: "function", function: { name: "free" } }]))).toBe(true)
    }))

  it("the key must be a positive integer", () => {
    for (const value of [0, -1, 1.5, "1"]) {
      const parsed = parseConfigText("edge.json", JSON.stringify({ runs: { maxToolSchemaBytes: value } }))
      expect(Either.isLeft(parsed) && parsed.left.message).toMatch(/runs\.maxToolSchemaBytes/)
    }
  })
})
