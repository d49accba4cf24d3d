import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"
import type { RunEvent } from "../run/RunEvent.js"
import type { SubmitRunRequest } from "../run/SubmitRunRequest.js"

/** A provider failed before or while producing events (the node turns it into a `Failed` event). */
export class ProviderError extends Schema.TaggedError<ProviderError>()("ProviderError", {
  provider: Schema.String,
  message: Schema.String
}) {}

/**
 * Executes runs for one configured model. Interrupting the stream aborts
 * whatever the provider is doing (an upstream HTTP request is aborted, not
 * left running).
 */
export interface Provider {
  readonly run: (request: SubmitRunRequest) => Stream.Stream<RunEvent, ProviderError>
}

export const Provider = Context.GenericTag<Provider>("@iop/edge/Provider")
