import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Session from "../../src/chat/session.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"
import { sessionConfig, weatherTool } from "../support/fixtures.js"
import { runSession } from "../support/runSession.js"
import { splitAt } from "../support/splits.js"

/** The edges of a call (issue 20, item 5): cut off by the token limit, written in the reasoning. */

const complete = (finishReason: string) => RunEvent.complete({ finishReason, toolCalls: [], metadata: {} })

const outcome = (out: ReadonlyArray<Session.Emission>) => ({
  content: out.flatMap((e) => (e._tag === "Content" ? [e.text] : [])).join(""),
  reasoning: out.flatMap((e) => (e._tag === "Reasoning" ? [e.text] : [])).join(""),
  calls: out.flatMap((e) => (e._tag === "ToolCalls" ? e.calls.map((c) => [c.name, c.arguments]) : [])),
  terminal: out.filter(Session.isTerminal).map((e) => (e._tag === "Finish" ? e.finishReason : e.error._tag)).join()
})

/** The text cut into deltas at the given points (as reads deliver it), then the run's end. */
const deltas = (text: string, cuts: ReadonlyArray<number>, end: RunEvent.RunEvent): Array<Session.SessionInput> =>
  [...splitAt(text, cuts).map((p) => RunEvent.delta(p)), end]

const config = sessionConfig({ tools: [weatherTool] })
const strict = sessionConfig({ tools: [weatherTool], policy: { strict: true } })

describe("markup cut off by the token limit", () => {
  const cases = [
    "Let me look. <tool_call>{\"name\": \"get_weather\", \"argum",
    "Let me look. <tool_call",
    "Let me look. <tool_c",
    "Let me look. [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Os",
    "Let me look. <minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Os"
  ]

  it("ends with finish `length`, the text before it kept, the partial markup never shown, at every split", () =>
    fc.assert(
      fc.property(fc.constantFrom(...cases), fc.array(fc.nat(), { maxLength: 6 }), fc.boolean(), (text, cuts, isStrict) => {
        expect(outcome(runSession(isStrict ? strict : config, deltas(text, cuts, complete("length"))))).toEqual({
          content: "Let me look. ",
          reasoning: "",
          calls: [],
          terminal: "length"
        })
      })
    ))

  it("a complete call before the cut is kept, and the finish stays `length`", () => {
    const text = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>\n<tool_call>{\"na"
    expect(outcome(runSession(config, deltas(text, [], complete("length"))))).toMatchObject({
      calls: [["get_weather", "{\"city\":\"Oslo\"}"]],
      terminal: "length"
    })
  })

  it("the same markup without the limit is still malformed (the model wrote it so)", () => {
    expect(outcome(runSession(config, deltas(cases[0] ?? "", [], complete("stop")))).terminal).toBe("ToolValidationFailed")
  })
})

describe("a call written in the reasoning", () => {
  const call = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>"

  it("from a think block or from the upstream's reasoning field, is the answer's call; its markup is not shown", () => {
    for (const inputs of [
      deltas(`<think>I should check. ${call}</think>`, [], complete("stop")),
      [RunEvent.reasoningDelta("I should check. "), RunEvent.reasoningDelta(call), complete("stop")]
    ]) {
      expect(outcome(runSession(config, inputs))).toEqual({
        content: "",
        reasoning: "I should check. ",
        calls: [["get_weather", "{\"city\":\"Oslo\"}"]],
        terminal: "tool_calls"
      })
    }
  })

  it("a draft in the reasoning does not double the answer's own call", () => {
    const inputs = deltas(`<think>Draft: ${call}</think>${call}`, [], complete("stop"))
    expect(outcome(runSession(config, inputs)).calls).toEqual([["get_weather", "{\"city\":\"Oslo\"}"]])
  })

  it("malformed markup in the reasoning is a draft: dropped, not an error", () => {
    const inputs = [RunEvent.reasoningDelta("Maybe <tool_call>{oops</tool_call> then."), RunEvent.delta("Hi."), complete("stop")]
    expect(outcome(runSession(config, inputs))).toEqual({ content: "Hi.", reasoning: "Maybe  then.", calls: [], terminal: "stop" })
  })
})

describe("a call to a tool the request did not declare", () => {
  const stop = complete("stop")
  it("in a family with markers of its own is a call (markup never shown); strict rejects it", () => {
    const text = "<tool_call>{\"name\": \"other\", \"arguments\": {}}</tool_call>"
    expect(outcome(runSession(config, deltas(text, [], stop)))).toEqual({
      content: "",
      reasoning: "",
      calls: [["other", "{}"]],
      terminal: "tool_calls"
    })
    expect(outcome(runSession(strict, deltas(text, [], stop))).terminal).toBe("ToolValidationFailed")
  })

  it("in a shape without markers (bare JSON, a pythonic list) stays text, so prose is not misread", () => {
    for (const text of ["{\"name\": \"other\", \"arguments\": {}}", "[other(a=1)]"]) {
      expect(outcome(runSession(config, deltas(text, [3], stop)))).toEqual({ content: text, reasoning: "", calls: [], terminal: "stop" })
    }
  })
})
