import { readFileSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { findModel } from "../../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../../src/config/loadConfig.js"
import { decodeBody, toChatRequest } from "../../../src/dialects/messages/request.js"
import { textStream } from "../../support/fakeUpstream.js"
import { messagesEdge } from "./edge.js"
import { parseEvents } from "./sse.js"

/**
 * Requests Claude Code 2.1.197 (`claude -p`, Anthropic SDK 0.94) sent to a recording upstream
 * (test/agents/recorder.mjs on the agents branch): every one decodes and translates, and the edge serves them.
 */

interface Recorded {
  readonly method: string
  readonly path: string
  readonly query: Readonly<Record<string, string>>
  readonly headers: Readonly<Record<string, string>>
  readonly body?: unknown
}

const isRecorded = (u: unknown): u is Recorded =>
  typeof u === "object" && u !== null && "method" in u && "path" in u && "headers" in u && "query" in u

const fixture = (name: string): Recorded => {
  const parsed: unknown = JSON.parse(readFileSync(new URL(`../../agents/fixtures/${name}.request.json`, import.meta.url), "utf8"))
  return isRecorded(parsed) ? parsed : expect.unreachable(`${name}: not a recorded request`)
}

const MODEL_REQUESTS = [
  "claude-sonnet45.turn1",
  "claude-sonnet45.turn2",
  "claude-custom-model.turn1",
  "claude-custom-model.turn2",
  "claude-title"
] as const

const config = Either.getOrThrow(
  decodeConfigJson("t", {
    models: [{ id: "local", aliases: ["claude-sonnet-4-5", "recorder-model"], provider: { type: "echo" } }]
  })
)

const translated = (name: string) => {
  const recorded = fixture(name)
  const wire = decodeBody(JSON.stringify(recorded.body))
  if (Either.isLeft(wire)) return expect.unreachable(`${name}: ${wire.left.message}`)
  const model = findModel(config.models, wire.right.model) ?? expect.unreachable("model")
  const request = toChatRequest(wire.right, model, { maxToolSchemaBytes: 262_144 })
  if (Either.isLeft(request)) return expect.unreachable(`${name}: ${request.left.message}`)
  return { recorded, wire: wire.right, request: request.right }
}

describe("Claude Code's recorded requests", () => {
  it.each(MODEL_REQUESTS)("%s: POST /v1/messages?beta=true decodes and translates", (name) => {
    const { recorded, request } = translated(name)
    expect(recorded.method).toBe("POST")
    expect(recorded.path).toBe("/v1/messages")
    expect(recorded.query).toEqual({ beta: "true" })
    expect(recorded.headers["anthropic-version"]).toBe("2023-06-01")
    expect(request.stream).toBe(true)
    expect(request.submit.sampling.maxTokens).toBe(32000)
    // The system prompt leads, without the billing header block.
    const system = request.submit.messages[0]
    expect(system?.role).toBe("system")
    expect(String(system?.content)).not.toContain("x-anthropic-billing-header")
    expect(request.notForwarded?.["parts"]).toContain("system: the x-anthropic-billing-header block")
    // The JSON metadata string Claude Code sends as user_id fits OpenAI's `user`.
    expect(request.submit.sampling.user).toMatch(/^\{"device_id":/)
  })

  it("the agent turns: 24 function tools; thinking enabled (sonnet) or adaptive (custom model) shows reasoning", () => {
    for (const name of ["claude-sonnet45.turn1", "claude-custom-model.turn1"]) {
      const { request, wire } = translated(name)
      expect(request.submit.tools).toHaveLength(24)
      expect(request.submit.tools.every((t) => t.type === "function" && t.function.parameters !== undefined)).toBe(true)
      expect(request.submit.tools.map((t) => t.function.name)).toContain("Bash")
      expect(wire.thinking?.type).toBe(name.startsWith("claude-sonnet") ? "enabled" : "adaptive")
      expect(request.policy.exposeReasoning).toBe(true)
    }
  })

  it("turn 2: the Bash tool_use and its tool_result become tool_calls and a tool message with the same id", () => {
    for (const name of ["claude-sonnet45.turn2", "claude-custom-model.turn2"]) {
      const { request } = translated(name)
      const messages = request.submit.messages
      const call = messages.find((m) => m.role === "assistant")
      const id = call?.tool_calls?.[0]?.id
      expect(id).toMatch(/^toolu_/)
      expect(call?.tool_calls?.[0]?.function).toEqual({
        name: "Bash",
        arguments: JSON.stringify({ command: "echo hi", description: "Print hi" })
      })
      const result = messages.findIndex((m) => m.role === "tool")
      expect(messages[result]).toEqual({ role: "tool", tool_call_id: id, content: "hi" })
      expect(messages[result - 1]).toBe(call)
    }
  })

  it("the custom model's mid-history system entry stays a system message in place", () => {
    const { request } = translated("claude-custom-model.turn2")
    expect(request.submit.messages.map((m) => m.role)).toEqual(["system", "user", "system", "assistant", "tool"])
    expect(String(request.submit.messages[2]?.content)).toMatch(/^Available agent types for the Agent tool:/)
  })

  it("the title request: thinking disabled hides reasoning, no tools, its json_schema output format forwarded", () => {
    const { request } = translated("claude-title")
    expect(request.policy.exposeReasoning).toBe(false)
    expect(request.submit.tools).toEqual([])
    expect(request.submit.sampling.temperature).toBe(1)
    expect(request.submit.sampling.responseFormat).toMatchObject({
      type: "json_schema",
      json_schema: { name: "output", schema: { type: "object", required: ["title"] } }
    })
  })

  it.scopedLive("the edge serves them: the HEAD / probe, then each request streamed as a well-formed Anthropic stream", () =>
    Effect.gen(function* () {
      const edge = yield* messagesEdge({ kind: "sse", events: textStream(["hi"]) }, {
        aliases: ["claude-sonnet-4-5", "recorder-model"]
      })
      const head = fixture("claude-head")
      const probe = yield* Effect.promise(() => fetch(`${edge.url}${head.path}`, { method: head.method }))
      expect(probe.status).toBe(200)
      for (const name of MODEL_REQUESTS) {
        const recorded = fixture(name)
        const response = yield* Effect.promise(() =>
          fetch(`${edge.url}${recorded.path}?beta=true`, {
            method: "POST",
            headers: {
              "content-type": "application/json",
              "anthropic-version": recorded.headers["anthropic-version"] ?? "",
              "anthropic-beta": recorded.headers["anthropic-beta"] ?? "",
              "x-api-key": "sk-ant-recorder-test"
            },
            body: JSON.stringify(recorded.body)
          })
        )
        expect(response.status).toBe(200)
        const events = parseEvents(yield* Effect.promise(() => response.text()))
        expect(events.map((e) => e.event)).toEqual([
          "message_start",
          "ping",
          "content_block_start",
          "content_block_delta",
          "content_block_stop",
          "message_delta",
          "message_stop"
        ])
        expect(events[0]?.data).toMatchObject({ message: { model: translated(name).wire.model } })
      }
      expect(edge.up.requests).toHaveLength(MODEL_REQUESTS.length)
    }))
})
