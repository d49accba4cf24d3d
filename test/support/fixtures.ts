import type { OutputPolicy } from "../../src/chat/policy.js"
import { DEFAULT_SENTINELS } from "../../src/chat/filters/sentinel.js"
import type { SessionConfig } from "../../src/chat/session.js"
import type { RequestTool } from "../../src/chat/toolcalls/types.js"
import { DEFAULT_TEXT_FORMATS } from "../../src/protocol/ModelOptions.js"

export const plainPolicy: OutputPolicy = {
  strict: false,
  buffered: false,
  completionTool: null,
  exposeReasoning: true,
  reasoningField: "reasoning_content",
  implicitThink: false,
  sentinels: DEFAULT_SENTINELS,
  toolFormats: DEFAULT_TEXT_FORMATS
}

export const weatherTool: RequestTool = {
  name: "get_weather",
  description: "Weather for a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
    additionalProperties: false
  }
}

export const answerTool: RequestTool = {
  name: "attempt_completion",
  parameters: { type: "object", properties: { result: { type: "string" } }, required: ["result"] }
}

/** Deterministic tool-call ids: call_000…1, call_000…2, … */
export const counterIds = () => {
  let n = 0
  return () => `call_${String(++n).padStart(24, "0")}`
}

export const sessionConfig = (
  overrides: Partial<Omit<SessionConfig, "policy">> & { policy?: Partial<OutputPolicy> } = {}
): SessionConfig => ({
  tools: overrides.tools ?? [],
  toolChoice: overrides.toolChoice ?? { _tag: "Auto" },
  newToolCallId: overrides.newToolCallId ?? counterIds(),
  policy: { ...plainPolicy, ...overrides.policy }
})
