import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { decodeBody, resolveChatRequest } from "../../src/dialects/chat-completions/request.js"
import { toUpstreamBody } from "../../src/providers/openai/upstreamRequest.js"

const config = Either.getOrThrow(decodeConfigJson("t", { models: [{ id: "m", provider: { type: "echo" } }] }))

const upstreamBodyOf = (body: Record<string, unknown>) =>
  Effect.gen(function* () {
    const wire = yield* decodeBody(JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], ...body }))
    const request = yield* resolveChatRequest(config, wire)
    return toUpstreamBody(request.submit, { upstreamModel: "up", toolMode: "native" }) as Record<string, unknown>
  })

describe("request fields reach the upstream as sent", () => {
  it.effect("reasoning_effort, user, logit_bias, penalties and max_completion_tokens under the caller's names", () =>
    Effect.gen(function* () {
      const body = yield* upstreamBodyOf({
        reasoning_effort: "high",
        user: "u-42",
        logit_bias: { "50256": -100 },
        presence_penalty: 0.5,
        frequency_penalty: -0.5,
        max_completion_tokens: 64
      })
      expect(body).toMatchObject({
        reasoning_effort: "high",
        user: "u-42",
        logit_bias: { "50256": -100 },
        presence_penalty: 0.5,
        frequency_penalty: -0.5,
        max_completion_tokens: 64
      })
      expect(body).not.toHaveProperty("max_tokens")
      const legacy = yield* upstreamBodyOf({ max_tokens: 32 })
      expect(legacy).toMatchObject({ max_tokens: 32 })
      expect(legacy).not.toHaveProperty("max_completion_tokens")
    })
  )

  it.effect("logprobs and top_logprobs reach the upstream as sent (they used to be refused with a 400)", () =>
    Effect.gen(function* () {
      const asked = yield* upstreamBodyOf({ logprobs: true, top_logprobs: 3 })
      expect(asked).toMatchObject({ logprobs: true, top_logprobs: 3 })
      const off = yield* upstreamBodyOf({ logprobs: false })
      expect(off).toMatchObject({ logprobs: false })
      expect(off).not.toHaveProperty("top_logprobs")
      const unset = yield* upstreamBodyOf({ logprobs: null })
      expect(unset).not.toHaveProperty("logprobs")
    })
  )

  it.effect("an upstream's own constraints (llama.cpp grammar / json_schema, vLLM guided_* / structured_outputs) pass as sent", () =>
    Effect.gen(function* () {
      const constraints = {
        grammar: "root ::= \"yes\" | \"no\"",
        json_schema: { type: "object" },
        guided_regex: "[a-z]+",
        guided_choice: ["a", "b"],
        structured_outputs: { json: { type: "object" } }
      }
      expect(yield* upstreamBodyOf(constraints)).toMatchObject(constraints)
      const plain = yield* upstreamBodyOf({})
      for (const field of ["grammar", "json_schema", "guided_json", "structured_outputs"]) expect(field in plain).toBe(false)
      yield* Effect.flip(decodeBody(JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], grammar: 3 })))
    }))
})
