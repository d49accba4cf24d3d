/** OpenAI Chat Completions as a dialect of the edge's HTTP API. */
import type { ChatRequest } from "../../chat/ChatRequest.js"
import { type Dialect, type RunInfo, runIdSuffix } from "../Dialect.js"
import { toHttpError } from "../openaiError.js"
import { openAiModel, openAiModelList } from "../openaiModels.js"
import * as Render from "./render.js"
import { decodeBody, toChatRequest } from "./request.js"
import type { ChatCompletionRequest } from "./wire.js"

/** What the Chat Completions renderers need of a request; `model` is the name the response carries. */
export const renderContext = (request: ChatRequest, model: string, run: RunInfo): Render.ResponseContext => ({
  id: `chatcmpl-${runIdSuffix(run)}`,
  created: run.created,
  model,
  reasoningField: request.policy.reasoningField,
  includeUsage: request.includeUsage,
  logprobs: request.submit.sampling.logprobs === true
})

/** OpenAI Chat Completions: `POST /v1/chat/completions`. */
export const dialect: Dialect<ChatCompletionRequest> = {
  api: "chat_completions",
  path: "/v1/chat/completions",
  // The default shape of the routes every API shares.
  speaks: () => false,
  modelList: openAiModelList,
  modelEntry: openAiModel,
  endpoints: [],
  decode: decodeBody,
  model: (wire) => wire.model,
  toChatRequest,
  streamRenderer: (wire, request, run) => Render.chunkRenderer(renderContext(request, wire.model, run)),
  body: (wire, request, run, emissions) => Render.completion(renderContext(request, wire.model, run), emissions),
  error: toHttpError
}

