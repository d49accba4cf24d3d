import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Session from "../../src/chat/session.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"
import { sessionConfig, weatherTool } from "../support/fixtures.js"
import { runSession } from "../support/runSession.js"
import { splitAt } from "../support/splits.js"

/** gpt-oss (harmony) through the whole session: its channels become reasoning, content and calls, at any split. */

const done = RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })

interface Outcome {
  readonly content: string
  readonly reasoning: string
  readonly calls: ReadonlyArray<readonly [string, string]>
  readonly terminal: string
}

const outcome = (out: ReadonlyArray<Session.Emission>): Outcome => ({
  content: out.flatMap((e) => (e._tag === "Content" ? [e.text] : [])).join(""),
  reasoning: out.flatMap((e) => (e._tag === "Reasoning" ? [e.text] : [])).join(""),
  calls: out.flatMap((e) => (e._tag === "ToolCalls" ? e.calls.map((c) => [c.name, c.arguments] as const) : [])),
  terminal: out.filter(Session.isTerminal).map((e) => (e._tag === "Finish" ? e.finishReason : e.error._tag)).join()
})

const splitRun = (text: string, cuts: ReadonlyArray<number>): ReadonlyArray<Session.SessionInput> =>
  [...splitAt(text, cuts).map((p) => RunEvent.delta(p)), done]

const CALL = "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary " +
  "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>"
const ANSWER = "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>" +
  "It is sunny.<|return|>"

const config = sessionConfig({ tools: [weatherTool] })

describe("harmony (gpt-oss) through the session", () => {
  it("analysis is reasoning, a functions.* recipient is a tool call, and no marker reaches content", () => {
    expect(outcome(runSession(config, splitRun(CALL, [])))).toEqual({
      content: "",
      reasoning: "Need the weather.",
      calls: [["get_weather", "{\"city\":\"Oslo\"}"]],
      terminal: "tool_calls"
    })
  })

  it("the final channel is the answer; <|end|> between messages does not cut it (it ends a message, not the turn)", () => {
    expect(outcome(runSession(sessionConfig(), splitRun(ANSWER, []))))
      .toEqual({ content: "It is sunny.", reasoning: "Simple.", calls: [], terminal: "stop" })
  })

  it("every split of either response gives the same outcome", () =>
    fc.assert(
      fc.property(fc.constantFrom(CALL, ANSWER), fc.array(fc.nat(), { maxLength: 12 }), (text, cuts) => {
        expect(outcome(runSession(config, splitRun(text, cuts)))).toEqual(outcome(runSession(config, splitRun(text, []))))
      })
    ))

  it("text that is not harmony passes as before (Phi-3's <|end|> still ends the turn)", () => {
    expect(outcome(runSession(sessionConfig(), splitRun("  Hello<|end|>garbage", [3]))))
      .toEqual({ content: "  Hello", reasoning: "", calls: [], terminal: "stop" })
  })

  it("narrowed away (toolFormats without harmony), the markers are text", () => {
    const plain = sessionConfig({ policy: { toolFormats: ["xml"] } })
    expect(outcome(runSession(plain, splitRun(ANSWER, []))).content).toContain("<|channel|>analysis")
  })
})
