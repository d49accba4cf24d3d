import { describe, expect, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import { exposeReasoning, outputPolicy } from "../../src/chat/policy.js"
import { ModelConfig } from "../../src/config/EdgeConfig.js"

describe("output policy", () => {
  // strict × include_reasoning × reasoning.exclude → shown?
  const matrix: ReadonlyArray<readonly [boolean, boolean | undefined, boolean | undefined, boolean]> = [
    [false, undefined, undefined, true],
    [false, true, undefined, true],
    [false, false, undefined, false],
    [false, undefined, true, false],
    [false, undefined, false, true],
    [false, true, true, false],
    [true, undefined, undefined, false],
    [true, true, undefined, true],
    [true, false, undefined, false],
    [true, undefined, false, true],
    [true, undefined, true, false],
    [true, true, true, false]
  ]
  it.each(matrix)("strict=%s include_reasoning=%s reasoning.exclude=%s → shown=%s", (strict, include, exclude, shown) => {
    expect(exposeReasoning(strict, { includeReasoning: include, reasoningExclude: exclude })).toBe(shown)
  })

  const model = (extra: Record<string, unknown>) =>
    Schema.decodeUnknownSync(ModelConfig)({ id: "m", provider: { type: "echo" }, ...extra })

  it("the completion tool applies only to strict models whose request has that tool, and forces the buffer", () => {
    const m = model({ output: { strict: true, xmlCompletionTool: "attempt_completion" } })
    expect(outputPolicy(m, { toolNames: ["attempt_completion"] })).toMatchObject({
      completionTool: "attempt_completion",
      buffered: true
    })
    expect(outputPolicy(m, { toolNames: ["other"] })).toMatchObject({ completionTool: null, buffered: false })
  })

  it("streamBuffer buffers a strict model's streams, and any model's whose tool_choice binds the answer (to replay it)", () => {
    const buffered = (output: Record<string, unknown>, choiceBinds: boolean) =>
      outputPolicy(model({ output }), { toolNames: ["f"], choiceBinds }).buffered
    expect(buffered({ strict: true, streamBuffer: true }, false)).toBe(true)
    expect(buffered({ streamBuffer: true }, true)).toBe(true)
    expect(buffered({ streamBuffer: true }, false)).toBe(false)
    expect(buffered({ strict: true }, true)).toBe(false)
    expect(buffered({}, true)).toBe(false)
  })

  it("sentinels: defaults plus the model's, or the model's alone", () => {
    expect(outputPolicy(model({ sentinels: { tokens: ["<END>"] } }), { toolNames: [] }).sentinels).toContain("<|im_end|>")
    expect(outputPolicy(model({ sentinels: { tokens: ["<END>"], replaceDefaults: true } }), { toolNames: [] }).sentinels).toEqual([
      "<END>"
    ])
  })

  it("the reasoning field: the request's override wins over the model's", () => {
    const m = model({ reasoning: { field: "reasoning" } })
    expect(outputPolicy(m, { toolNames: [] }).reasoningField).toBe("reasoning")
    expect(outputPolicy(m, { toolNames: [], fieldOverride: "both" }).reasoningField).toBe("both")
  })
})
