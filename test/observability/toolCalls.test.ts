import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"
import { RunFailed, ToolValidationFailed } from "../../src/chat/errors.js"
import { constraintOf, toolCallsOutcome } from "../../src/chat/runReport.js"
import type { ToolChoiceMode } from "../../src/chat/toolcalls/types.js"
import { Metrics } from "../../src/observability/Metrics.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"
import { ScriptedRunService } from "../../src/testing.js"
import { jsonBody, sseBody } from "../support/chatCompletionsBodies.js"
import { scriptedChat, weather } from "../support/scriptedChat.js"
import { metricSum } from "../support/e2e.js"

/**
 * `iop_tool_calls_total{model, outcome, constraint}`: once per request whose answer made or owed calls, or was
 * replayed or refused for them; `constraint` read from the last attempt's `Complete.metadata.constraint`.
 */

const { request, setup } = scriptedChat({ plain: "plain", toolValidationAttempts: 3, defaults: { tools: [weather] } })

const { events } = ScriptedRunService
const constrained = (constraint: string | undefined) => (constraint === undefined ? {} : { constraint })
const call = (args: string, constraint?: string) =>
  events(RunEvent.complete({
    finishReason: "tool_calls",
    toolCalls: [{ id: "call_1", name: "get_weather", arguments: args }],
    metadata: constrained(constraint)
  }))
const text = (t: string, constraint?: string) =>
  events(RunEvent.delta(t), RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: constrained(constraint) }))

/** The counter's samples, as `outcome/constraint → value` (model as given). */
const toolCalls = (model: string) =>
  Effect.gen(function* () {
    const { body } = yield* (yield* Metrics).exposition
    const out: Record<string, number> = {}
    for (const outcome of ["valid", "valid_after_replay", "invalid"]) {
      for (const constraint of ["grammar", "json_schema", "none"]) {
        const n = metricSum(body, "iop_tool_calls_total", { model, outcome, constraint })
        if (n > 0) out[`${outcome}/${constraint}`] = n
      }
    }
    return out
  })

const drained = (body: Stream.Stream<Uint8Array>) =>
  Stream.runCollect(Stream.decodeText(body)).pipe(Effect.map((texts) => Chunk.join(texts, "")))

describe("iop_tool_calls_total", () => {
  it.scoped("a non-stream valid call at the first attempt: valid, by the constraint its Complete event named", () => {
    const { layer } = setup([call("{\"city\": \"Oslo\"}", "grammar")])
    return Effect.gen(function* () {
      yield* jsonBody(yield* request({ model: "plain" }))
      expect(yield* toolCalls("plain")).toEqual({ "valid/grammar": 1 })
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a strict call valid after a replay: once, valid_after_replay, the last attempt's constraint", () => {
    const { runs, layer } = setup([call("{\"city\": 1}", "grammar"), call("{\"city\": \"Oslo\"}", "json_schema")])
    return Effect.gen(function* () {
      yield* jsonBody(yield* request({ model: "strict" }))
      expect(runs.submitted).toHaveLength(2)
      expect(yield* toolCalls("strict")).toEqual({ "valid_after_replay/json_schema": 1 })
    }).pipe(Effect.provide(layer))
  })

  it.scoped("required with no call in any of its attempts: once, invalid; an absent or unknown constraint is none", () => {
    const { runs, layer } = setup([text("no", "grammar"), text("still no"), text("never", "regex")])
    return Effect.gen(function* () {
      const result = yield* Effect.either(jsonBody(yield* request({ model: "plain", tool_choice: "required" })))
      expect(Either.isLeft(result) && result.left._tag).toBe("ToolValidationFailed")
      expect(runs.submitted).toHaveLength(3)
      expect(yield* toolCalls("plain")).toEqual({ "invalid/none": 1 })
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a text answer under auto (strict or not) made and owed no call: not counted", () => {
    const { layer } = setup([text("hello", "grammar"), text("hello", "grammar")])
    return Effect.gen(function* () {
      yield* jsonBody(yield* request({ model: "plain" }))
      yield* jsonBody(yield* request({ model: "strict" }))
      expect(yield* toolCalls("plain")).toEqual({})
      expect(yield* toolCalls("strict")).toEqual({})
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a run that failed is not counted, even after an invalid attempt", () => {
    const { layer } = setup([call("{\"city\": 1}"), events(RunEvent.failed("upstream broke"))])
    return Effect.gen(function* () {
      yield* Effect.either(jsonBody(yield* request({ model: "strict" })))
      expect(yield* toolCalls("strict")).toEqual({})
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a live stream counts as its one run: a valid call is valid, no call under required is invalid", () => {
    const { runs, layer } = setup([call("{\"city\": \"Oslo\"}", "json_schema"), text("no", "grammar")])
    return Effect.gen(function* () {
      // Each response in a scope of its own: a live run is reported as its request's scope closes.
      const live = (body: Record<string, unknown>) =>
        Effect.scoped(Effect.flatMap(Effect.flatMap(request({ model: "plain", stream: true, ...body }), sseBody), drained))
      yield* live({})
      const refused = yield* live({ tool_choice: "required" })
      expect(refused).toContain("tool_validation_error")
      // Live: no replay, the error event is the answer.
      expect(runs.submitted).toHaveLength(2)
      expect(yield* toolCalls("plain")).toEqual({ "valid/json_schema": 1, "invalid/grammar": 1 })
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a buffered stream replays as a non-stream request does and counts the same", () => {
    const { layer } = setup([call("{}", "none"), call("{\"city\": \"Oslo\"}", "grammar")])
    return Effect.gen(function* () {
      const body = yield* drained(yield* sseBody(yield* request({ model: "buffered", stream: true })))
      expect(body).toContain("Oslo")
      expect(yield* toolCalls("buffered")).toEqual({ "valid_after_replay/grammar": 1 })
    }).pipe(Effect.provide(layer))
  })
})

describe("toolCallsOutcome (which requests count, and how)", () => {
  const auto: ToolChoiceMode = { _tag: "Auto" }
  const finish = { _tag: "Finish", finishReason: "stop", usage: undefined } as const
  const invalid = { _tag: "Error", error: new ToolValidationFailed({ reason: "r" }) } as const
  const failed = { _tag: "Error", error: new RunFailed({ reason: "r" }) } as const
  const outcome = (choice: ToolChoiceMode, terminal: Parameters<typeof toolCallsOutcome>[1], calls: number, attempt: number, attempts: number) =>
    toolCallsOutcome({ toolChoice: choice }, terminal, calls, attempt, attempts) ?? "not counted"

  it("counts the request's end only: an invalid attempt with attempts left is a replay to come", () => {
    expect(outcome(auto, invalid, 0, 1, 2)).toBe("not counted")
    expect(outcome(auto, invalid, 0, 2, 2)).toBe("invalid")
    expect(outcome(auto, invalid, 0, 1, 1)).toBe("invalid")
  })
  it("valid: calls made, or a call owed (required, named) and given; valid_after_replay: any later attempt's success", () => {
    expect(outcome(auto, finish, 1, 1, 2)).toBe("valid")
    expect(outcome(auto, finish, 0, 1, 2)).toBe("not counted")
    expect(outcome({ _tag: "None" }, finish, 0, 1, 2)).toBe("not counted")
    expect(outcome({ _tag: "Auto", allowedTools: true }, finish, 0, 1, 2)).toBe("not counted")
    expect(outcome({ _tag: "Required" }, finish, 0, 1, 2)).toBe("valid")
    expect(outcome({ _tag: "Function", name: "f" }, finish, 1, 1, 2)).toBe("valid")
    expect(outcome(auto, finish, 0, 2, 2)).toBe("valid_after_replay")
  })
  it("any other end (failed, cancelled: no terminal) is not counted", () => {
    expect(outcome({ _tag: "Required" }, failed, 0, 2, 2)).toBe("not counted")
    expect(outcome({ _tag: "Required" }, undefined, 0, 1, 1)).toBe("not counted")
  })
  it("the constraint label: grammar and json_schema as sent, anything else none", () => {
    expect([constraintOf("grammar"), constraintOf("json_schema"), constraintOf("none"), constraintOf("GBNF"), constraintOf(undefined)])
      .toEqual(["grammar", "json_schema", "none", "none", "none"])
  })
})
