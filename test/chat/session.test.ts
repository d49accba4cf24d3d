import { coalesce } from "../../src/chat/coalesce.js"
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { RunFailed, RunTimedOut } from "../../src/chat/errors.js"
import { HIDDEN_REASONING_CONTENT } from "../../src/chat/reasoningFallback.js"
import * as Session from "../../src/chat/session.js"
import { runSession } from "../support/runSession.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"
import { answerTool, sessionConfig, weatherTool } from "../support/fixtures.js"

const done = (fields: Partial<Omit<RunEvent.Complete, "_tag">> = {}) =>
  RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {}, ...fields })

const contentOf = (out: ReadonlyArray<Session.Emission>) =>
  out.flatMap((e) => (e._tag === "Content" ? [e.text] : [])).join("")
const reasoningOf = (out: ReadonlyArray<Session.Emission>) =>
  out.flatMap((e) => (e._tag === "Reasoning" ? [e.text] : [])).join("")
const terminals = (out: ReadonlyArray<Session.Emission>) => out.filter(Session.isTerminal)

const arbitraryInput: fc.Arbitrary<Session.SessionInput> = fc.oneof(
  fc.string().map(RunEvent.delta),
  fc.string().map(RunEvent.reasoningDelta),
  fc.constant(done()),
  fc.string().map(RunEvent.failed),
  fc.string().map(RunEvent.cancelled),
  fc.constant(Session.outcome(new RunTimedOut({ bound: "idle", ms: 1 }))),
  fc.constant(Session.outcome(new RunFailed({ reason: "node disconnected" })))
)

const markupPiece = fc.constantFrom(
  "Hi ", "<think>", "hmm", "</think>", "<tool_call>", "{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Oslo\"}}",
  "</tool_call>", "<|im_end|>", "<|im_", "end|>", " done", "<tool", "{{", "\n"
)
const textInput: fc.Arbitrary<Session.SessionInput> = fc.oneof(
  markupPiece.map(RunEvent.delta),
  markupPiece.map(RunEvent.reasoningDelta)
)

const callsOf = (out: ReadonlyArray<Session.Emission>) =>
  out.flatMap((e) => (e._tag === "ToolCalls" ? e.calls.map((c) => [c.name, c.arguments]) : []))

describe("session", () => {
  it.prop(
    "coalesce: a batch with its adjacent deltas joined gives the same content, reasoning, calls and terminal",
    [fc.array(textInput, { maxLength: 25 }), fc.boolean(), fc.boolean(), fc.integer({ min: 0, max: 25 })],
    ([inputs, withTools, implicitThink, cut]) => {
      const config = sessionConfig({ tools: withTools ? [weatherTool] : [] })
      const cfg = { ...config, policy: { ...config.policy, implicitThink } }
      // Two batches, as two reads would deliver them, each coalesced on its own.
      const all = [...inputs, done()]
      const batches = [all.slice(0, cut), all.slice(cut)]
      const plain = runSession(cfg, all)
      const joined = runSession(cfg, batches.flatMap((b) => coalesce(b)))
      expect(contentOf(joined)).toBe(contentOf(plain))
      expect(reasoningOf(joined)).toBe(reasoningOf(plain))
      expect(callsOf(joined)).toEqual(callsOf(plain))
      expect(terminals(joined).map((t) => t._tag)).toEqual(terminals(plain).map((t) => t._tag))
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it("coalesce joins only adjacent deltas of one kind and keeps everything else in place", () => {
    const end = done()
    expect(coalesce([RunEvent.delta("a"), RunEvent.delta("b"), RunEvent.reasoningDelta("r"), RunEvent.reasoningDelta("s"), RunEvent.delta("c"), end])).toEqual([
      RunEvent.delta("ab"),
      RunEvent.reasoningDelta("rs"),
      RunEvent.delta("c"),
      end
    ])
  })

  it.prop(
    "exactly one terminal emission, last, whatever the event order",
    [fc.array(arbitraryInput, { maxLength: 30 }), fc.boolean()],
    ([inputs, withTools]) => {
      const out = runSession(sessionConfig({ tools: withTools ? [weatherTool] : [] }), inputs)
      const ends = terminals(out)
      const hasTerminalInput = inputs.some((i) => i._tag !== "Delta" && i._tag !== "ReasoningDelta")
      expect(ends.length).toBe(hasTerminalInput ? 1 : 0)
      if (ends.length === 1) expect(out[out.length - 1]).toBe(ends[0])
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it("a closed session accepts nothing more", () => {
    const [closed, out] = Session.step(Session.initial(sessionConfig()), done())
    expect(closed._tag).toBe("Closed")
    expect(terminals(out)).toHaveLength(1)
    for (const input of [RunEvent.delta("x"), done(), RunEvent.failed("late")]) {
      const [after, more] = Session.step(closed, input)
      expect(after).toBe(closed)
      expect(more).toEqual([])
    }
  })

  it.prop(
    "content comes out as it went in, in order, exactly once (no tools, no markup)",
    [fc.array(fc.stringMatching(/^[a-z .,!?\n]*$/), { maxLength: 20 })],
    ([deltas]) => {
      const out = runSession(sessionConfig(), [...deltas.map(RunEvent.delta), done()])
      expect(contentOf(out)).toBe(deltas.join(""))
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it("native tool calls: one ToolCalls emission, finish reason tool_calls, normalised", () => {
    const out = runSession(sessionConfig({ tools: [weatherTool] }), [
      done({ finishReason: "stop", toolCalls: [{ name: "GET_WEATHER", arguments: "" }, { id: "call_x", name: "get_weather", arguments: "{\"city\":\"Paris\"}" }] })
    ])
    expect(out).toEqual([
      {
        _tag: "ToolCalls",
        calls: [
          { id: "call_000000000000000000000001", name: "get_weather", arguments: "{}" },
          { id: "call_x", name: "get_weather", arguments: "{\"city\":\"Paris\"}" }
        ]
      },
      { _tag: "Finish", finishReason: "tool_calls", usage: undefined }
    ])
  })

  it("text tool-call markup becomes a call and never reaches content", () => {
    const text = "Checking.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>"
    const deltas = text.match(/.{1,3}/gs) ?? []
    const out = runSession(sessionConfig({ tools: [weatherTool] }), [...deltas.map(RunEvent.delta), done()])
    expect(contentOf(out)).toBe("Checking.")
    expect(out.find((e) => e._tag === "ToolCalls")).toEqual({
      _tag: "ToolCalls",
      calls: [{ id: "call_000000000000000000000001", name: "get_weather", arguments: "{\"city\":\"Paris\"}" }]
    })
    expect(out[out.length - 1]).toMatchObject({ _tag: "Finish", finishReason: "tool_calls" })
  })

  it("without request tools, markup is just text", () => {
    const text = "<tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>"
    const out = runSession(sessionConfig(), [RunEvent.delta(text), done()])
    expect(contentOf(out)).toBe(text)
  })

  it("malformed markup is a tool validation failure, even when not strict", () => {
    const out = runSession(sessionConfig({ tools: [weatherTool] }), [
      RunEvent.delta("ok <tool_call>{\"name\": \"get_weather\", \"arguments\": {broken</tool_call>"),
      done()
    ])
    expect(contentOf(out)).toBe("ok ")
    expect(out[out.length - 1]).toMatchObject({ _tag: "Error", error: { _tag: "ToolValidationFailed" } })
  })

  it("strict: a call that fails its schema is never emitted", () => {
    const out = runSession(sessionConfig({ tools: [weatherTool], policy: { strict: true } }), [
      done({ toolCalls: [{ name: "get_weather", arguments: "{\"city\": 42}" }] })
    ])
    expect(out.some((e) => e._tag === "ToolCalls")).toBe(false)
    const last = out[out.length - 1]
    expect(last?._tag).toBe("Error")
    if (last?._tag === "Error") expect(last.error.message).toContain("get_weather")
  })

  it("strict: a valid call is emitted", () => {
    const out = runSession(sessionConfig({ tools: [weatherTool], policy: { strict: true } }), [
      done({ toolCalls: [{ name: "get_weather", arguments: "{\"city\": \"Oslo\"}" }] })
    ])
    expect(out.map((e) => e._tag)).toEqual(["ToolCalls", "Finish"])
  })

  it("strict with tool_choice required: a text answer is invalid", () => {
    const out = runSession(
      sessionConfig({ tools: [weatherTool], toolChoice: { _tag: "Required" }, policy: { strict: true } }),
      [RunEvent.delta("no tools today"), done()]
    )
    expect(out[out.length - 1]).toMatchObject({ _tag: "Error", error: { _tag: "ToolValidationFailed" } })
  })

  describe("ToolValidationFailed names the tool to blame (the replay's replayTool)", () => {
    const failedTool = (config: Session.SessionConfig, inputs: ReadonlyArray<Session.SessionInput>) => {
      const last = runSession(config, inputs).at(-1)
      return last?._tag === "Error" && last.error._tag === "ToolValidationFailed" ? last.error.tool ?? "nobody" : "valid"
    }
    const strict = (toolChoice: Session.SessionConfig["toolChoice"] = { _tag: "Auto" }) =>
      sessionConfig({ tools: [weatherTool], toolChoice, policy: { strict: true } })
    const named = { _tag: "Function", name: "get_weather" } as const

    it("a native call with invalid arguments, and the same call written as markup: the called tool", () => {
      expect(failedTool(strict(), [done({ toolCalls: [{ name: "get_weather", arguments: "{\"city\": 1}" }] })])).toBe("get_weather")
      expect(failedTool(strict(), [RunEvent.delta("<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>"), done()]))
        .toBe("get_weather")
    })
    it("no call under required, a call to an undeclared tool: nobody; under a named choice: the named tool", () => {
      expect(failedTool(strict({ _tag: "Required" }), [RunEvent.delta("text"), done()])).toBe("nobody")
      expect(failedTool(strict(), [done({ toolCalls: [{ name: "rm", arguments: "{}" }] })])).toBe("nobody")
      expect(failedTool(strict(named), [RunEvent.delta("text"), done()])).toBe("get_weather")
      expect(failedTool(strict(named), [done({ toolCalls: [{ name: "rm", arguments: "{}" }] })])).toBe("get_weather")
    })
    it("malformed markup: nobody, or the named tool under a named choice (a non-strict model too)", () => {
      const broken = [RunEvent.delta("<tool_call>{\"name\": oops</tool_call>"), done()]
      expect(failedTool(sessionConfig({ tools: [weatherTool] }), broken)).toBe("nobody")
      expect(failedTool(sessionConfig({ tools: [weatherTool], toolChoice: named }), broken)).toBe("get_weather")
    })
  })

  it("the summary keeps what the Complete event said of the answer's constraint, as sent", () => {
    const summaryAfter = (metadata: Record<string, string>) => {
      const [closed] = Session.step(Session.initial(sessionConfig({})), done({ metadata }))
      return closed._tag === "Closed" ? closed.summary.constraint : "open"
    }
    expect(summaryAfter({ constraint: "grammar" })).toBe("grammar")
    expect(summaryAfter({ constraint: "regex" })).toBe("regex")
    expect(summaryAfter({})).toBeUndefined()
  })

  it("completion tool: a strict text answer is wrapped into the tool, not shown as content", () => {
    const out = runSession(
      sessionConfig({
        tools: [weatherTool, answerTool],
        policy: { strict: true, buffered: true, completionTool: "attempt_completion" }
      }),
      [RunEvent.delta("All "), RunEvent.delta("done."), done()]
    )
    expect(contentOf(out)).toBe("")
    expect(out.find((e) => e._tag === "ToolCalls")).toEqual({
      _tag: "ToolCalls",
      calls: [{ id: "call_000000000000000000000001", name: "attempt_completion", arguments: "{\"result\":\"All done.\"}" }],
      wrapped: true
    })
  })

  it("reasoning is emitted when exposed and hidden otherwise", () => {
    const events = [RunEvent.reasoningDelta("think"), RunEvent.delta("answer"), done()]
    expect(reasoningOf(runSession(sessionConfig(), events))).toBe("think")
    expect(reasoningOf(runSession(sessionConfig({ policy: { exposeReasoning: false } }), events))).toBe("")
  })

  it("a leading think block in content is reasoning, not content", () => {
    const out = runSession(sessionConfig(), ["<th", "ink>plan</thi", "nk>\n\nHello"].map(RunEvent.delta).concat(done()))
    expect(reasoningOf(out)).toBe("plan")
    expect(contentOf(out)).toBe("Hello")
  })

  it("end tokens never reach content, even split", () => {
    const out = runSession(sessionConfig(), ["Hi<|im_", "end|>garbage"].map(RunEvent.delta).concat(done()))
    expect(contentOf(out)).toBe("Hi")
  })

  it("reasoning-only run: visible fallback content, hidden placeholder when reasoning is hidden", () => {
    const events = [RunEvent.reasoningDelta("  only thoughts "), done()]
    expect(contentOf(runSession(sessionConfig(), events))).toBe("only thoughts")
    expect(contentOf(runSession(sessionConfig({ policy: { exposeReasoning: false } }), events))).toBe(
      HIDDEN_REASONING_CONTENT
    )
    expect(contentOf(runSession(sessionConfig({ policy: { strict: true, exposeReasoning: false } }), events))).toBe("")
  })

  it("failed and cancelled runs end with a run error carrying the message", () => {
    for (const [ev, message] of [
      [RunEvent.failed("boom"), "boom"],
      [RunEvent.cancelled("edge shutting down"), "edge shutting down"]
    ] as const) {
      const out = runSession(sessionConfig(), [RunEvent.delta("x"), ev])
      expect(out[out.length - 1]).toMatchObject({ _tag: "Error", error: { _tag: "RunFailed", reason: message } })
    }
  })

  it("usage and finish reason pass through", () => {
    const usage = { inputTokens: 3, outputTokens: 5, reasoningTokens: 2, cachedInputTokens: 1 }
    const out = runSession(sessionConfig(), [RunEvent.delta("x"), done({ finishReason: "length", usage })])
    expect(out[out.length - 1]).toEqual({ _tag: "Finish", finishReason: "length", usage })
  })
})
