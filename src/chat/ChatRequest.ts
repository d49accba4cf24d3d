import type { ModelOptions } from "../protocol/ModelOptions.js"
import type { Api } from "../protocol/Api.js"
import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"
import type { OutputPolicy } from "./policy.js"
import type { RequestTool, ToolChoiceMode } from "./toolcalls/types.js"

/** A request the chat plane can run, whatever API it came in on: decoded, its model resolved, its policy decided. */
export interface ChatRequest {
  /** The API the request came in on (metrics' and logs' `api` label). */
  readonly api: Api
  readonly model: ModelOptions
  readonly submit: SubmitRunRequest
  readonly policy: OutputPolicy
  readonly tools: ReadonlyArray<RequestTool>
  readonly toolChoice: ToolChoiceMode
  readonly includeUsage: boolean
  /**
   * The caller's key id (`KeyPolicy.id`), set by the door for a model with reasoning continuity: the reasoning it
   * remembers and puts back is the caller's own.
   */
  readonly caller?: string
  /**
   * What the dialect's translator accepted but did not forward, by request field, as comma-separated types
   * (Responses: tool types such as `web_search`, input item types such as `web_search_call`). Logged once per
   * request at debug by the Responder: not an error, but worth seeing when a client's tools do nothing.
   */
  readonly notForwarded?: Readonly<Record<string, string>>
}
