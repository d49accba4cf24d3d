import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { formatsOfTemplate } from "../../src/protocol/templateFormats.js"
import { propsUrl } from "../../src/providers/openai/chatTemplate.js"
import { TestServer } from "../../src/testing/TestServer.js"
import { chunk, startFakeUpstream } from "../support/fakeUpstream.js"

/**
 * `toolFormats: "auto"`: the node reads the upstream's chat template (llama.cpp's `GET /props`) once and narrows
 * the formats to the ones it teaches; without a template every format stays on.
 */

const WEATHER = {
  type: "function" as const,
  function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }
}

// What a MiniMax-M2 template says of calls, in a few lines of it.
const MINIMAX_TEMPLATE = "{%- if tools %}To call tools, write <minimax:tool_call>\n<invoke name=\"tool-name\">" +
  "\n<parameter name=\"key\">value</parameter>\n</invoke>\n</minimax:tool_call>{%- endif %}"
const MINIMAX_CALL = "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Oslo</parameter>" +
  "\n</invoke>\n</minimax:tool_call>"
const HERMES_CALL = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>"

/** An upstream that answers every request with `text` (as one SSE delta), serving `template` at /props if given. */
const upstreamWriting = (text: string, template?: string) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      startFakeUpstream(
        { kind: "sse", events: [chunk({ content: text }), chunk({ finish_reason: "stop" })] },
        template === undefined ? {} : { chatTemplate: template }
      )
    ),
    (up) => Effect.promise(() => up.close())
  )

const ask = (baseURL: string) =>
  Effect.promise(() =>
    new OpenAI({ baseURL, apiKey: "test", maxRetries: 0 }).chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "weather?" }],
      tools: [WEATHER]
    })
  )

const onEdge = <A, E, R>(baseUrl: string, test: (server: TestServer.Service) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(TestServer, test).pipe(
    Effect.provide(
      TestServer.layer({
        config: { models: [{ id: "m", tools: "text", toolFormats: "auto", provider: { type: "openai", baseUrl } }] }
      })
    )
  )

describe("toolFormats: \"auto\"", () => {
  it("recognises a template by the markers it teaches, and keeps the marker-less shapes", () => {
    expect(formatsOfTemplate(MINIMAX_TEMPLATE)).toEqual(["minimax_m2", "bare_json", "llamacpp_envelope"])
    expect(formatsOfTemplate("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}")).toBeUndefined()
    expect(formatsOfTemplate("<|start|>assistant<|channel|>final<|message|>")).toContain("harmony")
  })

  it("props live beside /v1", () => {
    expect(propsUrl("http://127.0.0.1:8081/v1")?.href).toBe("http://127.0.0.1:8081/props")
    expect(propsUrl("http://host/llama/v1/")?.href).toBe("http://host/llama/props")
  })

  it.scopedLive("narrowed to the template's family: its calls parse, another family's markup stays text", () =>
    Effect.gen(function* () {
      const taught = yield* upstreamWriting(MINIMAX_CALL, MINIMAX_TEMPLATE)
      const answer = yield* onEdge(taught.url, (server) => ask(server.baseURL))
      expect(answer.choices[0]?.finish_reason).toBe("tool_calls")
      expect(answer.choices[0]?.message.tool_calls?.[0]).toMatchObject({
        function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" }
      })
      const other = yield* upstreamWriting(HERMES_CALL, MINIMAX_TEMPLATE)
      const asText = yield* onEdge(other.url, (server) => ask(server.baseURL))
      expect(asText.choices[0]?.message.content).toBe(HERMES_CALL)
      expect(asText.choices[0]?.message.tool_calls ?? []).toEqual([])
    }))

  it.scopedLive("without a template to read, every format stays on", () =>
    Effect.gen(function* () {
      const upstream = yield* upstreamWriting(HERMES_CALL)
      const answer = yield* onEdge(upstream.url, (server) => ask(server.baseURL))
      expect(answer.choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: "get_weather" } })
    }))
})

describe("constraints: \"auto\"", () => {
  const requiredCall = (baseURL: string) =>
    Effect.promise(() =>
      new OpenAI({ baseURL, apiKey: "test", maxRetries: 0 }).chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "weather?" }],
        tools: [WEATHER],
        tool_choice: "required"
      })
    )
  const onTextModel = <A, E, R>(baseUrl: string, test: (server: TestServer.Service) => Effect.Effect<A, E, R>) =>
    Effect.flatMap(TestServer, test).pipe(
      Effect.provide(TestServer.layer({ config: { models: [{ id: "m", tools: "text", provider: { type: "openai", baseUrl, constraints: "auto" } }] } }))
    )

  it.scopedLive("a llama.cpp upstream (it answers /props) is sent the grammar of a request that must call a tool", () =>
    Effect.gen(function* () {
      const upstream = yield* upstreamWriting(HERMES_CALL, "{{ messages }}")
      const answer = yield* onTextModel(upstream.url, (server) => requiredCall(server.baseURL))
      expect(answer.choices[0]?.finish_reason).toBe("tool_calls")
      const grammar = (upstream.requests[0]?.body as { grammar?: unknown } | undefined)?.grammar
      expect(typeof grammar === "string" && grammar.includes("get_weather")).toBe(true)
    }))

  it.scopedLive("an upstream that is not llama.cpp (no /props) is sent no grammar", () =>
    Effect.gen(function* () {
      const upstream = yield* upstreamWriting(HERMES_CALL)
      yield* onTextModel(upstream.url, (server) => requiredCall(server.baseURL))
      expect(upstream.requests[0]?.body).not.toHaveProperty("grammar")
    }))
})
