import type { ModelConfig } from "../config/EdgeConfig.js"
import type { Api } from "../dialects/Dialect.js"
import type { SubmitRunRequest } from "../run/SubmitRunRequest.js"
import type { OutputPolicy } from "./policy.js"
import type { RequestTool, ToolChoiceMode } from "./toolcalls/types.js"

/** A request the chat plane can run, whatever API it came in on: decoded, its model resolved, its policy decided. */
export interface ChatRequest {
  /** The API the request came in on (metrics' and logs' `api` label). */
  readonly api: Api
  readonly model: ModelConfig
  readonly submit: SubmitRunRequest
  readonly policy: OutputPolicy
  readonly tools: ReadonlyArray<RequestTool>
  readonly toolChoice: ToolChoiceMode
  readonly includeUsage: boolean
}
