import * as Either from "effect/Either"
import { type Dialect, type RunInfo, runIdSuffix } from "../Dialect.js"
import { estimateInputTokens } from "./countTokens.js"
import { toAnthropicError } from "./errors.js"
import * as Render from "./render.js"
import { decodeBody, decodeCountTokens, toChatRequest } from "./request.js"
import type { MessagesRequest } from "./wire.js"

/** `msg_` and the run id's own part, as `chatcmpl-` is for Chat Completions. */
export const messageId = (run: RunInfo): string => `msg_${runIdSuffix(run)}`

const context = (wire: MessagesRequest, run: RunInfo): Render.MessageContext => ({ id: messageId(run), model: wire.model })

/** Anthropic Messages: `POST /v1/messages`. */
export const dialect: Dialect<MessagesRequest> = {
  api: "messages",
  path: "/v1/messages",
  // Anthropic's clients send `anthropic-version` on every request: they get Anthropic's shapes.
  speaks: (headers) => headers["anthropic-version"] !== undefined,
  modelList: (names) => modelList(names),
  modelEntry: (name) => modelEntry(name),
  endpoints: [{
    // An estimate (`estimateInputTokens`) behind the same guard; no run.
    path: "/v1/messages/count_tokens",
    handle: (body) =>
      Either.map(decodeCountTokens(body), (wire) => ({
        model: wire.model,
        answer: () => ({ input_tokens: estimateInputTokens(wire) })
      }))
  }],
  decode: decodeBody,
  model: (wire) => wire.model,
  toChatRequest,
  streamRenderer: (wire, _request, run) =>
    Render.streamRenderer({ ...context(wire, run), inputTokens: estimateInputTokens(wire) }),
  body: (wire, _request, run, emissions) => Render.message(context(wire, run), emissions),
  error: toAnthropicError
}

/** Anthropic's release date field, for models whose date the edge does not know: the epoch, as its docs allow. */
const UNKNOWN_DATE = "1970-01-01T00:00:00Z"

/** `GET /v1/models` in Anthropic's list shape: every id and alias the caller may use, one entry each. */
/** One model in Anthropic's shape (`GET /v1/models/{id}`, and each entry of the list). */
export const modelEntry = (id: string) => ({ type: "model", id, display_name: id, created_at: UNKNOWN_DATE })

export const modelList = (names: ReadonlyArray<string>) => ({
  data: names.map(modelEntry),
  has_more: false,
  first_id: names[0] ?? null,
  last_id: names[names.length - 1] ?? null
})
