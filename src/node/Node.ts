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

/** The built-in provider a configured model names (`echo` or `openai`). */
export const makeProvider = (model: ModelConfig): Effect.Effect<Provider, never, NodeHttpClient.Dispatcher> => {
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
        // "auto" is read by `resolveFromUpstream`; a config that was not, constrains nothing.
        constraints: p.constraints === "llama.cpp" ? "llama.cpp" : "none"
      })
  }
}

/**
 * A model's `"auto"` settings made concrete from what its upstream says of itself (llama.cpp's `/props`, read once):
 * `toolFormats` — the formats its chat template teaches (the default ones when it serves none or teaches none the
 * edge knows); the provider's `constraints` — `llama.cpp` when it is llama.cpp's server, else `none`. Logged.
 */
export const resolveFromUpstream = (model: ModelConfig): Effect.Effect<ModelConfig, never, NodeHttpClient.Dispatcher> => {
  const p = model.provider
  const formatsAuto = model.toolFormats === "auto"
  if (p.type !== "openai") return Effect.succeed(formatsAuto ? { ...model, toolFormats: DEFAULT_TEXT_FORMATS } : model)
  if (!formatsAuto && p.constraints !== "auto") return Effect.succeed(model)
  return Effect.flatMap(fetchProps({ baseUrl: p.baseUrl, apiKey: p.apiKey, headers: p.headers }), (props) => {
    const template = props?.chatTemplate
    const taught = template === undefined ? undefined : formatsOfTemplate(template)
    const toolFormats = formatsAuto ? taught ?? DEFAULT_TEXT_FORMATS : model.toolFormats
    const constraints = p.constraints === "auto" ? (props?.llamaCpp === true ? "llama.cpp" as const : "none" as const) : p.constraints
    const resolved: ModelConfig = { ...model, toolFormats, provider: { ...p, constraints } }
    const log = Effect.logInfo("read from the upstream").pipe(
      Effect.annotateLogs({
        model: model.id,
        ...(formatsAuto
          ? { tool_formats: taught?.join(",") ?? (template === undefined ? "default: no chat template" : "default: template not recognised") }
          : {}),
        ...(p.constraints === "auto" ? { constraints } : {})
      })
    )
    return Effect.as(log, resolved)
  })
}

/** Configured models with their built-in providers (and their `"auto"` tool formats read). */
export const servedFromConfig = (
  models: ReadonlyArray<ModelConfig>
): Effect.Effect<ReadonlyArray<ServedModel>, never, NodeHttpClient.Dispatcher> =>
  Effect.forEach(models, (configured) =>
    Effect.flatMap(resolveFromUpstream(configured), (model) =>
      Effect.map(makeProvider(model), (provider) => ({ model, provider }))))

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
