import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { EdgeConfig } from "../config/EdgeConfig.js"
import { NodeRegistry } from "./NodeRegistry.js"
import * as LocalNode from "./LocalNode.js"
import * as Node from "../node/Node.js"
import type { ModelConfig } from "../node/ModelConfig.js"
import { NodeId } from "../protocol/RunEvent.js"
import { getJson, type GetTarget } from "../providers/openai/upstreamGet.js"
import { rootOf } from "../providers/openai/upstreamKind.js"
import type { HealthCheckConfig } from "../providers/ProviderConfig.js"

/**
 * The node inside the edge process: the config's `models` with their built-in providers, through `LocalNode`. A
 * model with several upstream replicas (`provider.baseUrls`) is served by one node per replica instead
 * (`<model>@<replica>`, its `slots` and `weight`), so that the run plane routes among them as among any nodes
 * (NATS nodes serving the model included), each checked at `provider.healthCheck` when set.
 */
export const layer: Layer.Layer<never, never, EdgeConfig | NodeRegistry | NodeHttpClient.Dispatcher> =
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const config = yield* EdgeConfig
      const replicated = (m: ModelConfig) => Node.replicasOfModel(m).length > 1
      const models = yield* Node.servedFromConfig(config.models.filter((m) => !replicated(m)))
      const replicas = yield* Effect.forEach(config.models.filter(replicated), (model) =>
        Effect.map(Node.replicasFromConfig(model), (served) => served.map((r) => replicaLayer(model, r))))
      return Layer.mergeAll(LocalNode.layer({ id: "embedded", models }), ...replicas.flat())
    })
  )

const replicaLayer = (
  model: ModelConfig,
  r: Node.ServedReplica
): Layer.Layer<never, never, NodeRegistry | NodeHttpClient.Dispatcher> => {
  const node = LocalNode.layer({
    id: r.id,
    models: [r.served],
    ...(r.replica.slots !== undefined ? { maxConcurrentRuns: r.replica.slots } : {}),
    ...(r.replica.weight !== undefined ? { weight: r.replica.weight } : {})
  })
  const p = model.provider
  if (p.type !== "openai" || p.healthCheck === undefined) return node
  // After the node is registered: a check of a node not registered is dropped.
  return Layer.scopedDiscard(healthChecks(NodeId.make(r.id), r.replica.url, p.healthCheck, { apiKey: p.apiKey, headers: p.headers })).pipe(Layer.provideMerge(node))
}

/**
 * A replica's active health check: `GET {root}{path}` now and every `intervalMs` (by the `Clock`), each bounded by
 * `timeoutMs`; a 200 is healthy (`NodeRegistry.checked`), anything else (no answer, a 503 while loading) ejects it.
 */
export const healthChecks = (
  nodeId: NodeId,
  baseUrl: string,
  check: HealthCheckConfig,
  auth: GetTarget
) =>
  Effect.gen(function* () {
    const registry = yield* NodeRegistry
    const dispatcher = yield* NodeHttpClient.Dispatcher
    const url = `${rootOf(baseUrl)}${check.path}`
    if (!URL.canParse(url)) return
    const target = new URL(url)
    const once = getJson(dispatcher, target, auth, Duration.millis(check.timeoutMs)).pipe(
      Effect.flatMap((answer) =>
        registry.checked(nodeId, answer._tag === "Json" || (answer._tag === "Other" && answer.status === 200)))
    )
    yield* once.pipe(Effect.repeat(Schedule.spaced(Duration.millis(check.intervalMs))), Effect.forkScoped)
  })
