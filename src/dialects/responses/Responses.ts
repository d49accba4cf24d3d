import { toHttpError } from "../openaiError.js"
import { openAiModel, openAiModelList } from "../openaiModels.js"
import { type Dialect, type RunInfo, runIdSuffix } from "../Dialect.js"
import * as Render from "./render.js"
import { decodeBody, toChatRequest } from "./request.js"
import type { ResponsesRequest } from "./wire.js"

/**
 * The request fields a response echoes, as OpenAI's responses do: the caller's model name, the function tools (the
 * only ones run), and each sampling field as sent or `null` (the upstream's default is not the edge's to know).
 * `store` is always false: nothing is stored.
 */
export const echoOf = (wire: ResponsesRequest): Render.Echo => ({
  instructions: wire.instructions ?? null,
  max_output_tokens: wire.max_output_tokens ?? null,
  model: wire.model,
  parallel_tool_calls: wire.parallel_tool_calls ?? true,
  reasoning: {
    effort: wire.reasoning?.effort ?? null,
    summary: wire.reasoning?.summary ?? wire.reasoning?.generate_summary ?? null
  },
  store: false,
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

/** What the Responses renderers need of a request. */
const context = (wire: ResponsesRequest, run: RunInfo): Render.ResponseContext => {
  const suffix = runIdSuffix(run)
  return { id: `resp_${suffix}`, suffix, created: run.created, echo: echoOf(wire) }
}

/**
 * OpenAI Responses: `POST /v1/responses`. Stateless: every request carries its whole conversation in `input`
 * (`previous_response_id` is refused), and nothing is stored whatever `store` says. Errors before a response are
 * OpenAI's (`toHttpError`), as for Chat Completions.
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
