import type * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { DEFAULT_TEXT_FORMATS, type ModelOptions } from "../protocol/ModelOptions.js"
import { formatsOfTemplate } from "../protocol/templateFormats.js"
import { fetchProps } from "../providers/openai/chatTemplate.js"
import type { ModelConfig } from "./ModelConfig.js"
import { type OpenAiProviderConfig, type Replica, replicasOf } from "../providers/ProviderConfig.js"
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

/** The base URL of a configured model's (first) upstream: the one whose `/props` is read for the model. */
const firstUrl = (p: OpenAiProviderConfig): string => replicasOf(p)[0]?.url ?? ""

/**
 * The built-in provider a configured model names (`echo` or `openai`), for its one upstream or for the replica at
 * `baseUrl` (one of its `baseUrls`).
 */
export const makeProvider = (
  model: ModelConfig,
  read: UpstreamRead = {},
  baseUrl?: string
): Effect.Effect<Provider, never, NodeHttpClient.Dispatcher> => {
  const p = model.provider
  switch (p.type) {
    case "echo":
      return Effect.succeed(Echo.make({ tokenDelayMs: p.tokenDelayMs }))
    case "openai":
      return OpenAiProvider.make({
        baseUrl: baseUrl ?? firstUrl(p),
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
  return Effect.flatMap(fetchProps({ baseUrl: firstUrl(p), apiKey: p.apiKey, headers: p.headers }), (answer) => {
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

/** The configured model's upstream replicas: more than one for `baseUrls` of several (none for `echo`). */
export const replicasOfModel = (model: ModelConfig): ReadonlyArray<Replica> =>
  model.provider.type === "openai" ? replicasOf(model.provider) : []

/**
 * Configured models with their built-in providers (and their `"auto"` tool formats read). A node serves one
 * upstream per model: a model with several replicas is the edge's to route (its embedded node's replica nodes),
 * or one node per replica's.
 */
export const servedFromConfig = (
  models: ReadonlyArray<ModelConfig>
): Effect.Effect<ReadonlyArray<ServedModel>, never, NodeHttpClient.Dispatcher> =>
  Effect.forEach(models, (configured, i) =>
    replicasOfModel(configured).length > 1
      ? Effect.dieMessage(
        `models[${i}].provider.baseUrls: a node serves one upstream per model; run one node per replica, or list ` +
          "the replicas in the edge's own config"
      )
      : Effect.flatMap(readUpstream(configured), ({ model, read }) =>
        Effect.map(makeProvider(model, read), (provider) => ({ model, provider }))))

/** A configured model's replica, as a node of its own: the node's id, its provider, its capacity. */
export interface ServedReplica {
  /** `<model id>@<replica name>`. */
  readonly id: string
  readonly replica: Replica
  readonly served: ServedModel
}

/**
 * A model with several replicas (`baseUrls`), one provider per replica (the model's `"auto"` tool formats read
 * from the first): the edge registers each as a node, so that its runs are routed among them.
 */
export const replicasFromConfig = (
  configured: ModelConfig
): Effect.Effect<ReadonlyArray<ServedReplica>, never, NodeHttpClient.Dispatcher> =>
  Effect.flatMap(readUpstream(configured), ({ model, read }) =>
    Effect.forEach(replicasOfModel(configured), (replica) =>
      Effect.map(makeProvider(model, read, replica.url), (provider) => ({
        id: `${model.id}@${replica.name}`,
        replica,
        served: { model, provider }
      }))))

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
