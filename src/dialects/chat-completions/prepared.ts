/** The typed API's prepared request: the chat plane's request, held opaque for callers. */
import type { ChatRequest } from "../../chat/ChatRequest.js"

let unwrap: (prepared: PreparedRequest) => ChatRequest
let wrap: (request: ChatRequest) => PreparedRequest

/**
 * A Chat Completions request checked and resolved as `POST /v1/chat/completions` would (its model looked up, the
 * same checks and output policy): what `create` and `stream` run. Made by `ChatCompletions.request`.
 */
export class PreparedRequest {
  readonly #request: ChatRequest
  private constructor(request: ChatRequest) {
    this.#request = request
  }
  /** The model's id (an alias in the request resolved to it). */
  get model(): string {
    return this.#request.submit.model
  }
  static {
    unwrap = (prepared) => prepared.#request
    wrap = (request) => new PreparedRequest(request)
  }
}

export const prepared = (request: ChatRequest): PreparedRequest => wrap(request)
export const chatRequestOf = (prepared: PreparedRequest): ChatRequest => unwrap(prepared)
