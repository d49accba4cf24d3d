import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"

/**
 * A run request for `RunService.submit` (or a provider's `start`): one user message, no tools, default
 * sampling. `{ ...runRequest("mine"), sampling: { maxTokens: 4 } }` for more.
 */
export const runRequest = (model: string, prompt = "hi"): SubmitRunRequest => ({
  model,
  messages: [{ role: "user", content: prompt }],
  tools: [],
  sampling: {},
  metadata: {}
})
