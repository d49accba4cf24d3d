import * as Schema from "effect/Schema"

/**
 * A model as every plane sees it, whoever serves it (a configured provider, a provider layer, a remote node): its
 * id, aliases and the output options the chat plane applies. The config file composes these with a provider.
 */

/** The text tool-call formats the edge understands. */
export const TEXT_FORMATS = [
  "harmony",
  "functionary_v32",
  "xml",
  "mustache",
  "qwen3_xml",
  "glm45",
  "glm47",
  "minimax_m2",
  "minimax_m1",
  "seed_oss",
  "deepseek_v32",
  "deepseek_v4",
  "kimi_k3",
  "hy3",
  "mistral",
  "bare_json",
  "llama3_json",
  "granite",
  "cohere",
  "apertus",
  "llamacpp_envelope",
  "nemotron",
  "functionary_v31",
  "deepseek_v3",
  "kimi_k2",
  "pythonic",
  "llama4_pythonic",
  "olmo3",
  "lfm2",
  "function_gemma",
  "gemma4"
] as const
export type TextFormat = (typeof TEXT_FORMATS)[number]

/**
 * The formats active with no `toolFormats`: all but Functionary v3.2, whose first message has no marker to know it
 * by (it is on when named, or when `"auto"` reads it from the model's template).
 */
export const DEFAULT_TEXT_FORMATS: ReadonlyArray<TextFormat> = TEXT_FORMATS.filter((f) => f !== "functionary_v32")

/** How a model is given tools: the upstream's native `tools`, or described in the prompt and parsed out of the text. */
export const ToolMode = Schema.Literal("native", "text")
export type ToolMode = typeof ToolMode.Type

export const OutputConfig = Schema.Struct({
  strict: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  streamBuffer: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  xmlCompletionTool: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null })
})
export type OutputConfig = typeof OutputConfig.Type

export const ReasoningConfig = Schema.Struct({
  /** The chat template opens `<think>` in the prompt: output is reasoning until `</think>`. */
  implicitOpen: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** Where reasoning goes in responses: `reasoning_content`, `reasoning`, or `both`. */
  field: Schema.optionalWith(Schema.Literal("reasoning_content", "reasoning", "both"), {
    default: () => "reasoning_content" as const
  }),
  /**
   * Reasoning continuity: an assistant turn sent back without the reasoning the edge produced for it gets it back
   * (found by its tool-call ids or its text) before it goes upstream. Off by default: it costs memory
   * (`runs.reasoningMemory`), and most templates drop earlier turns' reasoning anyway.
   */
  continuity: Schema.optionalWith(Schema.Boolean, { default: () => false })
})
export type ReasoningConfig = typeof ReasoningConfig.Type

export const SentinelConfig = Schema.Struct({
  /** End tokens added to the defaults (or replacing them with `replaceDefaults`). */
  tokens: Schema.optionalWith(Schema.Array(Schema.String.pipe(Schema.minLength(1))), { default: () => [] }),
  replaceDefaults: Schema.optionalWith(Schema.Boolean, { default: () => false })
})
export type SentinelConfig = typeof SentinelConfig.Type

const TimeBound = Schema.NullOr(Schema.Int.pipe(Schema.positive()))

/**
 * This model's own run bounds, in place of the edge's `runs.firstTokenTimeoutMs` / `runs.maxRunMs`: a number of ms,
 * or `null` for none; absent, the edge's. Part of what a node announces: whoever serves a model knows how long its
 * prefill and its answers take.
 */
export const ModelRunsConfig = Schema.Struct({
  firstTokenTimeoutMs: Schema.optional(TimeBound),
  maxRunMs: Schema.optional(TimeBound)
})
export type ModelRunsConfig = typeof ModelRunsConfig.Type

/**
 * How the run plane picks among a model's nodes (its configured replicas and the nodes that serve it over NATS):
 * `affinity` (the default, when there is a choice) sends a prompt to the node that was recently sent the longest
 * prefix of it, within a load bound; `least_busy`; `round_robin`.
 */
export const RoutingPolicy = Schema.Literal("affinity", "least_busy", "round_robin")
export type RoutingPolicy = typeof RoutingPolicy.Type

/**
 * What the planes above a node need of a model, whoever serves it (a configured provider, a provider layer, a remote
 * node): its names, the output options the chat plane applies, its run bounds and its routing (the run plane's).
 */
export const modelOptionsFields = {
  id: Schema.String.pipe(Schema.minLength(1)),
  /** Other names callers may use for this model (an agent's default model names); answered as the model. */
  aliases: Schema.optionalWith(Schema.Array(Schema.String.pipe(Schema.minLength(1))), { default: () => [] }),
  tools: Schema.optionalWith(ToolMode, { default: () => "native" as const }),
  /**
   * Text tool-call formats parsed out of this model's output (default: all). `"auto"`: the ones its upstream's chat
   * template teaches, read by its node when it starts and when it reconnects to the bus (all when there is
   * no template to read).
   */
  toolFormats: Schema.optionalWith(Schema.Union(Schema.Literal("auto"), Schema.Array(Schema.Literal(...TEXT_FORMATS))), {
    default: () => DEFAULT_TEXT_FORMATS
  }),
  output: Schema.optionalWith(OutputConfig, { default: () => OutputConfig.make({}) }),
  reasoning: Schema.optionalWith(ReasoningConfig, { default: () => ReasoningConfig.make({}) }),
  sentinels: Schema.optionalWith(SentinelConfig, { default: () => SentinelConfig.make({}) }),
  runs: Schema.optional(ModelRunsConfig),
  /** How its runs are spread over the nodes that serve it (default: `affinity`); see `RoutingPolicy`. */
  routing: Schema.optional(RoutingPolicy)
}

/** A model's id, aliases and output options, without its provider. */
export const ModelOptions = Schema.Struct(modelOptionsFields)
export type ModelOptions = typeof ModelOptions.Type

/**
 * A model's options with every default filled in, from a name or the options a caller sets:
 * `modelOptions("mine")`, `modelOptions({ id: "mine", tools: "text" })`.
 */
export const modelOptions = (model: string | typeof ModelOptions.Encoded): ModelOptions =>
  Schema.decodeSync(ModelOptions)(typeof model === "string" ? { id: model } : model)

/** The model a caller's name (an id or an alias) names. */
export const findModel = <M extends ModelOptions>(models: ReadonlyArray<M>, name: string): M | undefined =>
  models.find((m) => m.id === name) ?? models.find((m) => m.aliases.includes(name))
