import * as Layer from "effect/Layer"
import type { ApiKeySourceError } from "../config/apiKeys.js"
import { EdgeConfig } from "../config/EdgeConfig.js"
import type { InvalidConfig } from "../config/loadConfig.js"
import * as Edge from "../Edge.js"

/** What `TestEdge.layer` provides besides your nodes' services. */
export type Services = Edge.EdgeServices | EdgeConfig

/** Why building a test edge fails: its config does not decode, or a key source cannot be read. */
export type BuildError = InvalidConfig | ApiKeySourceError

export interface Options<ROut = never, E = never, RIn = never> {
  /**
   * The config, as `Edge.layer` takes it. `models` defaults to none, so that only your nodes serve; models
   * given here are served by the embedded node with their built-in providers (`echo`, or `openai` pointed at
   * a fake upstream). `log.level` defaults to `warn` (no access log, no line per run: give `log` to have them).
   */
  readonly config?: Edge.EdgeConfigInput
  /**
   * What serves the models: `ScriptedProvider.layer("mine")`, `LocalNode.layerModel("mine", provider)`,
   * `layerEchoModel()`, merged with `Layer.mergeAll`. Built over the edge's registry and config; the services
   * it provides (a `ScriptedProvider`) are provided to the test too.
   */
  readonly nodes?: Layer.Layer<ROut, E, RIn>
}

const base = (config: Edge.EdgeConfigInput | undefined): Layer.Layer<Services, BuildError> =>
  Edge.layerFrom({ metrics: Edge.layerMetricsTest, nodes: Edge.layerEmbeddedNode }).pipe(Layer.provideMerge(Layer.effect(EdgeConfig, Edge.decodeConfig({ models: [], log: { level: "warn" }, ...config }))))

/**
 * The edge's services (`ChatCompletions`, `RunService`, `NodeRegistry`, `Metrics` and the `EdgeConfig`) in
 * this process, for a test: `Edge.layerFrom` with `layerMetricsTest` (no process metrics) over `options.config`,
 * with no model but those `options.nodes` serve. No server: call the services, or serve them with
 * `TestServer.layer`. Built where the test provides it, so it runs on the test's `Clock` (`TestClock` under
 * `it.effect`): the idle watchdog and scripted sleeps move only when the test adjusts it.
 */
export function layer(options?: Options): Layer.Layer<Services, BuildError>
export function layer<ROut, E, RIn>(
  options: Options<ROut, E, RIn>
): Layer.Layer<ROut | Services, E | BuildError, Exclude<RIn, Services>>
// The overloads type the result; the implementation only forwards the layers.
export function layer(options: Options<never, unknown, unknown> = {}): Layer.Layer<never, unknown, unknown> {
  const edge = base(options.config)
  return options.nodes === undefined ? edge : Layer.provideMerge(options.nodes, edge)
}
