import { toHttpError } from "../openaiError.js"
import { openAiModel, openAiModelList } from "../openaiModels.js"
import { type Dialect, type RunInfo, runIdSuffix } from "../Dialect.js"
import * as Render from "./render.js"
import { decodeBody, toChatRequest } from "./request.js"
import type { ResponsesRequest } from "./wire.js"

/**
 * The request fields a response echoes, as OpenAI's responses do: the caller's model name, the function tools (the
 * only ones run), and each sampling field as sent or `null` (the upstream's default is not the edge's to know).
 * `store` says whether the response is kept (the request's `store`, unless the edge keeps none).
 */
export const echoOf = (wire: ResponsesRequest): Render.Echo => ({
  instructions: wire.instructions ?? null,
  max_output_tokens: wire.max_output_tokens ?? null,
  model: wire.model,
  parallel_tool_calls: wire.parallel_tool_calls ?? true,
  previous_response_id: wire.previous_response_id ?? null,
  reasoning: {
    effort: wire.reasoning?.effort ?? null,
    summary: wire.reasoning?.summary ?? wire.reasoning?.generate_summary ?? null
  },
  store: wire.stored?.keep === true,
  temperature: wire.temperature ?? null,
  text: {
    format: wire.text?.format ?? { type: "text" },
    ...(wire.text?.verbosity != null ? { verbosity: wire.text.verbosity } : {})
  },
  tool_choice: wire.tool_choice ?? "auto",
  tools: wire.tools.flatMap((t) =>
    t._tag === "Function"
      ? [{
        type: "function",
        name: t.tool.name,
        description: t.tool.description ?? null,
        parameters: t.tool.parameters ?? null,
        strict: t.tool.strict ?? null
      }]
      : []
  ),
  top_p: wire.top_p ?? null,
  truncation: wire.truncation ?? "disabled",
  user: wire.user ?? null,
  metadata: wire.metadata ?? {},
  prompt_cache_key: wire.prompt_cache_key ?? null
})

/** What the Responses renderers need of a request; `hold`: its stream's terminal event waits for the store. */
export const context = (wire: ResponsesRequest, run: RunInfo, hold = false): Render.ResponseContext => {
  const suffix = runIdSuffix(run)
  return { id: `resp_${suffix}`, suffix, created: run.created, echo: echoOf(wire), hold }
}

/**
 * OpenAI Responses: `POST /v1/responses`. Pure, as every dialect: what a request refers to (`previous_response_id`,
 * `item_reference`) is resolved and its response kept by `StoredResponses` (the routes serve it with that state);
 * without it such a request is refused and nothing is kept. Errors before a response are OpenAI's (`toHttpError`),
 * as for Chat Completions.
 */
export const dialect: Dialect<ResponsesRequest> = {
  api: "responses",
  path: "/v1/responses",
  speaks: () => false,
  modelList: openAiModelList,
  modelEntry: openAiModel,
  endpoints: [],
  decode: decodeBody,
  model: (wire) => wire.model,
  toChatRequest,
  streamRenderer: (wire, _request, run) => Render.eventRenderer(context(wire, run)),
  body: (wire, _request, run, emissions) => Render.responseBody(context(wire, run), emissions),
  error: toHttpError
}
