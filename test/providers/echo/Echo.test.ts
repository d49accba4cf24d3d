import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { FastCheck as fc } from "effect"
import * as Echo from "../../../src/providers/echo/Echo.js"
import { echoTokens } from "../../../src/providers/echo/tokens.js"
import type { SubmitRunRequest } from "../../../src/protocol/SubmitRunRequest.js"
import { RecordingSink } from "../../../src/testing.js"

const request = (messages: SubmitRunRequest["messages"], maxTokens?: number): SubmitRunRequest => ({
  model: "echo",
  messages,
  tools: [],
  sampling: maxTokens === undefined ? {} : { maxTokens },
  metadata: {}
})

const run = (req: SubmitRunRequest) =>
  Effect.scoped(
    Effect.gen(function* () {
      const rec = yield* RecordingSink.make
      yield* Echo.make({ tokenDelayMs: 0 }).start(req, rec.sink)
      yield* rec.ended
      return yield* rec.events
    })
  )

describe("echo provider", () => {
  it.prop("tokens join back to the text", [fc.string()], ([text]) => {
    expect(echoTokens(text).join("")).toBe(text)
  }, { fastCheck: { numRuns: 1000 } })

  it.effect("streams the last user message (text parts joined) and reports usage", () =>
    Effect.gen(function* () {
      const events = yield* run(
        request([
          { role: "user", content: "first" },
          { role: "assistant", content: "ok" },
          { role: "user", content: [{ type: "text", text: "hello " }, { type: "image_url", image_url: { url: "x" } }, { type: "text", text: "world" }] }
        ])
      )
      const text = events.flatMap((e) => (e._tag === "Delta" ? [e.text] : [])).join("")
      expect(text).toBe("hello world")
      expect(events[events.length - 1]).toMatchObject({
        _tag: "Complete",
        finishReason: "stop",
        usage: { inputTokens: 5, outputTokens: 3 }
      })
    })
  )

  it.effect("max_tokens truncates with finish_reason length", () =>
    Effect.gen(function* () {
      const events = yield* run(request([{ role: "user", content: "one two three four" }], 2))
      expect(events.map((e) => (e._tag === "Delta" ? e.text : e._tag === "Complete" ? e.finishReason : e._tag))).toEqual([
        "one",
        " two",
        "length"
      ])
    })
  )
})
