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

  it.effect("asking for logprobs is a 400 naming the field, not a silent null", () =>
    Effect.gen(function* () {
      const refused = yield* Effect.flip(upstreamBodyOf({ logprobs: true }))
      expect(refused).toMatchObject({ _tag: "InvalidRequest", param: "logprobs" })
      const top = yield* Effect.flip(upstreamBodyOf({ top_logprobs: 3 }))
      expect(top).toMatchObject({ _tag: "InvalidRequest", param: "top_logprobs" })
      const off = yield* upstreamBodyOf({ logprobs: false })
      expect(off).not.toHaveProperty("logprobs")
    })
  )
})
