import type * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { DEFAULT_TEXT_FORMATS, type ModelOptions } from "../protocol/ModelOptions.js"
import { formatsOfTemplate } from "../protocol/templateFormats.js"
import { fetchProps } from "../providers/openai/chatTemplate.js"
import type { ModelConfig } from "./ModelConfig.js"
import * as Echo from "../providers/echo/Echo.js"
import * as OpenAiProvider from "../providers/openai/OpenAiProvider.js"
import type { Provider } from "../providers/Provider.js"
import * as RunEvent from "../protocol/RunEvent.js"
import type { NodeId, RunId } from "../protocol/RunEvent.js"
import type { RunSink } from "../protocol/RunSink.js"
import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"
import { onCloseSync } from "../common/onClose.js"

/** A model a node serves: its options (what the chat plane applies) and the provider that runs it. */
export interface ServedModel {
  readonly model: ModelOptions
  readonly provider: Provider
}

/** Hosts the providers of its models and executes runs with them. */
export interface Node {
  readonly id: NodeId
  readonly models: ReadonlyArray<ModelOptions>
  readonly maxConcurrentRuns: number
  /**
   * Starts a run with its model's provider, its events into `sink`; closing
   * the scope stops it (the provider's upstream request is aborted).
   */
  readonly execute: (runId: RunId, request: SubmitRunRequest, sink: RunSink) => Effect.Effect<void, never, Scope.Scope>
  readonly activeRuns: Effect.Effect<number>
}

/** What a node read of a model's upstream when it started (`/props`, for `toolFormats: "auto"`), for its provider. */
export interface UpstreamRead {
  /** `/props` answered: llama.cpp's, or a definite other answer (no such route); absent when not read or no answer. */
  readonly props?: "llama.cpp" | "other"
}

/** The built-in provider a configured model names (`echo` or `openai`). */
export const makeProvider = (
  model: ModelConfig,
  read: UpstreamRead = {}
): Effect.Effect<Provider, never, NodeHttpClient.Dispatcher> => {
  const p = model.provider
  switch (p.type) {
    case "echo":
      return Effect.succeed(Echo.make({ tokenDelayMs: p.tokenDelayMs }))
    case "openai":
      return OpenAiProvider.make({
        baseUrl: p.baseUrl,
        upstreamModel: p.model ?? model.id,
        apiKey: p.apiKey,
        toolMode: model.tools,
        ...(p.headers !== undefined ? { headers: p.headers } : {}),
        ...(p.extraBody !== undefined ? { extraBody: p.extraBody } : {}),
        constraints: p.constraints,
        toolFormats: model.toolFormats === "auto" ? DEFAULT_TEXT_FORMATS : model.toolFormats,
        strict: model.output.strict,
        ...(read.props !== undefined ? { propsRead: read.props } : {})
      })
  }
}

/**
 * A model's `toolFormats: "auto"` made concrete from its upstream's chat template (llama.cpp's `/props`, read once):
 * the formats it teaches (the default ones when it serves none or teaches none the edge knows). Logged. What `/props`
 * said goes to the provider too, so that `constraints: "auto"` does not ask for it again. No other model's upstream
 * is asked anything here: `constraints: "auto"` asks on the first request that needs a constraint.
 */
export const readUpstream = (
  model: ModelConfig
): Effect.Effect<{ readonly model: ModelConfig; readonly read: UpstreamRead }, never, NodeHttpClient.Dispatcher> => {
  const p = model.provider
  if (model.toolFormats !== "auto") return Effect.succeed({ model, read: {} })
  if (p.type !== "openai") return Effect.succeed({ model: { ...model, toolFormats: DEFAULT_TEXT_FORMATS }, read: {} })
  return Effect.flatMap(fetchProps({ baseUrl: p.baseUrl, apiKey: p.apiKey, headers: p.headers }), (answer) => {
    const template = answer._tag === "Props" ? answer.props.chatTemplate : undefined
    const taught = template === undefined ? undefined : formatsOfTemplate(template)
    const read: UpstreamRead = answer._tag === "Props"
      ? { props: answer.props.llamaCpp ? "llama.cpp" : "other" }
      : answer._tag === "NoProps" ? { props: "other" } : {}
    const log = Effect.logInfo("read from the upstream").pipe(
      Effect.annotateLogs({
        model: model.id,
        tool_formats: taught?.join(",") ?? (template === undefined ? "default: no chat template" : "default: template not recognised"),
        ...(read.props === "llama.cpp" && p.constraints === "auto" ? { constraints: "llama.cpp" } : {})
      })
    )
    return Effect.as(log, { model: { ...model, toolFormats: taught ?? DEFAULT_TEXT_FORMATS }, read })
  })
}

/** A model's `"auto"` tool formats made concrete (`readUpstream`). */
export const resolveFromUpstream = (model: ModelConfig): Effect.Effect<ModelConfig, never, NodeHttpClient.Dispatcher> =>
  Effect.map(readUpstream(model), (r) => r.model)

/** Configured models with their built-in providers (and their `"auto"` tool formats read). */
export const servedFromConfig = (
  models: ReadonlyArray<ModelConfig>
): Effect.Effect<ReadonlyArray<ServedModel>, never, NodeHttpClient.Dispatcher> =>
  Effect.forEach(models, (configured) =>
    Effect.flatMap(readUpstream(configured), ({ model, read }) =>
      Effect.map(makeProvider(model, read), (provider) => ({ model, provider }))))

export const make = (options: {
  readonly id: NodeId
  readonly models: ReadonlyArray<ServedModel>
  readonly maxConcurrentRuns: number
}): Node => {
  const providers = new Map<string, Provider>()
  for (const served of options.models) providers.set(served.model.id, served.provider)
  let active = 0

  const execute = (_runId: RunId, request: SubmitRunRequest, sink: RunSink) => {
    const provider = providers.get(request.model)
    if (provider === undefined) {
      return Effect.sync(() => {
        sink.emit([RunEvent.failed(`node ${options.id} does not serve model "${request.model}"`)])
      })
    }
    active += 1
    return onCloseSync(() => (active -= 1)).pipe(Effect.zipRight(provider.start(request, sink)))
  }

  return {
    id: options.id,
    models: options.models.map((m) => m.model),
    maxConcurrentRuns: options.maxConcurrentRuns,
    execute,
    activeRuns: Effect.sync(() => active)
  }
}
