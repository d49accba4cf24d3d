import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { BusConfig, NodeSettings } from "../node/nats/BusConfig.js"
import { ModelConfig } from "../node/ModelConfig.js"
import { LogConfig } from "../observability/Logging.js"
import { TelemetryConfig } from "../observability/Telemetry.js"
import type { ModelOptions } from "../protocol/ModelOptions.js"
import { ResponsesConfig } from "../store/StoreConfig.js"

// The planes' own schemas, composed here: re-exported so that the config's parts can be named from one module.
export { ModelConfig } from "../node/ModelConfig.js"
export { LogConfig } from "../observability/Logging.js"
export { OtlpConfig, TelemetryConfig } from "../observability/Telemetry.js"
export {
  findModel,
  ModelOptions,
  modelOptions,
  OutputConfig,
  ReasoningConfig,
  SentinelConfig
} from "../protocol/ModelOptions.js"
export { EchoProviderConfig, OpenAiProviderConfig, ProviderConfig } from "../providers/ProviderConfig.js"
export { MemoryStoreConfig, NatsStoreConfig, ResponsesConfig, ResponseStoreConfig } from "../store/StoreConfig.js"

/** The JSON config file of `iop edge` (see docs/configuration.md). Unknown keys are errors. */

const PositiveInt = Schema.Int.pipe(Schema.positive())
const Port = Schema.Int.pipe(Schema.between(0, 65535))

/** An API key, alone or with its own limits. */
export const ApiKeyEntry = Schema.Union(
  Schema.Redacted(Schema.String.pipe(Schema.minLength(1))),
  Schema.Struct({
    key: Schema.Redacted(Schema.String.pipe(Schema.minLength(1))),
    /** Shown in logs instead of the key. */
    name: Schema.optional(Schema.String),
    /** The models this key may use (default: all). */
    models: Schema.optional(Schema.Array(Schema.String)),
    /** Runs this key may have open at once (default: unlimited). */
    maxConcurrentRuns: Schema.optional(PositiveInt)
  })
)
export type ApiKeyEntry = typeof ApiKeyEntry.Type

/** A browser origin as `scheme://host[:port]`, without a path. */
const Origin = Schema.String.pipe(
  Schema.pattern(/^[a-z][a-z0-9+.-]*:\/\/[^/?#\s]+\/?$/i, {
    message: () => "an origin: scheme://host[:port] (no path), e.g. https://app.example"
  })
)

export const CorsConfig = Schema.Struct({
  /** Browser origins whose cross-origin requests are served (default: none; any other `Origin` gets 403). */
  allowedOrigins: Schema.optionalWith(Schema.Array(Origin), { default: () => [] })
})
export type CorsConfig = typeof CorsConfig.Type

/** Node refuses to start when the headers may take longer than the whole request. */
const headersWithinRequest = (s: { readonly headersTimeoutMs: number; readonly requestTimeoutMs: number }) =>
  s.headersTimeoutMs <= s.requestTimeoutMs ||
  { path: ["headersTimeoutMs"], message: `must be at most requestTimeoutMs (${s.requestTimeoutMs})` }

const ServerFields = Schema.Struct({
  host: Schema.optionalWith(Schema.String, { default: () => "127.0.0.1" }),
  port: Schema.optionalWith(Port, { default: () => 8080 }),
  apiKeys: Schema.optionalWith(Schema.Array(ApiKeyEntry), { default: () => [] }),
  /** A file with more keys, one per line (`#` comments); read at start. */
  apiKeysFile: Schema.optional(Schema.String),
  /** An environment variable with more keys, comma-separated; read at start. */
  apiKeysEnv: Schema.optional(Schema.String),
  maxBodyBytes: Schema.optionalWith(PositiveInt, { default: () => 4 * 1024 * 1024 }),
  /** Slow clients: the longest wait for a request's headers, and for the whole request. */
  headersTimeoutMs: Schema.optionalWith(PositiveInt, { default: () => 10_000 }),
  requestTimeoutMs: Schema.optionalWith(PositiveInt, { default: () => 30_000 }),
  /** Open connections at most; more are closed as they arrive. */
  maxConnections: Schema.optionalWith(PositiveInt, { default: () => 10_000 }),
  shutdownGraceMs: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()), { default: () => 10_000 }),
  cors: Schema.optionalWith(CorsConfig, { default: () => CorsConfig.make({}) }),
  /** On a loopback bind: `Host` names accepted beside localhost, 127.0.0.1 and [::1] (DNS rebinding). */
  allowedHosts: Schema.optionalWith(Schema.Array(Schema.String.pipe(Schema.minLength(1))), { default: () => [] })
})

export const ServerConfig = ServerFields.pipe(Schema.filter(headersWithinRequest))
export type ServerConfig = typeof ServerConfig.Type

/** `runs.reasoningMemory`: what reasoning continuity (a model's `reasoning.continuity`) may keep in memory. */
export const ReasoningMemoryConfig = Schema.Struct({
  /** Turns remembered at most (default 10000). */
  maxTurns: Schema.optionalWith(PositiveInt, { default: () => 10_000 }),
  /** Characters of reasoning remembered at most (default 16000000, about 32 MB). */
  maxChars: Schema.optionalWith(PositiveInt, { default: () => 16_000_000 })
})

export const RunsConfig = Schema.Struct({
  idleTimeoutMs: Schema.optionalWith(PositiveInt, { default: () => 60_000 }),
  /** The longest a run waits on a whole (non-stream) upstream answer, in place of `idleTimeoutMs` (default 600000). */
  wholeAnswerTimeoutMs: Schema.optionalWith(PositiveInt, { default: () => 600_000 }),
  /**
   * The longest a streamed run may wait for its first content, reasoning or tool-call output (default: none);
   * a model's `runs.firstTokenTimeoutMs` replaces it.
   */
  firstTokenTimeoutMs: Schema.optional(PositiveInt),
  /** The longest a run may take, from its submission to its last event (default: none); a model's `runs.maxRunMs` replaces it. */
  maxRunMs: Schema.optional(PositiveInt),
  /** Runs the edge serves at once across all callers (default: unlimited); more get 429. */
  maxConcurrentRuns: Schema.optional(PositiveInt),
  toolValidationAttempts: Schema.optionalWith(PositiveInt, { default: () => 2 }),
  /** The largest `parameters` schema one request tool may have, as JSON bytes (default 262144); larger: 400. */
  maxToolSchemaBytes: Schema.optional(PositiveInt),
  reasoningMemory: Schema.optionalWith(ReasoningMemoryConfig, { default: () => ReasoningMemoryConfig.make({}) })
})
export type RunsConfig = typeof RunsConfig.Type

/** Ids and aliases name one model each. */
const uniqueModelIds = (models: ReadonlyArray<ModelOptions>) => {
  const seen = new Set<string>()
  for (const [i, m] of models.entries()) {
    if (seen.has(m.id)) return { path: [i, "id"], message: `duplicate model id "${m.id}"` }
    seen.add(m.id)
  }
  for (const [i, m] of models.entries()) {
    for (const [j, alias] of m.aliases.entries()) {
      if (seen.has(alias)) return { path: [i, "aliases", j], message: `duplicate model name "${alias}"` }
      seen.add(alias)
    }
  }
  return true
}

export const EdgeConfigSchema = Schema.Struct({
  /** Editors' pointer to `iop config schema` output; ignored by the edge. */
  $schema: Schema.optional(Schema.String),
  server: Schema.optionalWith(ServerConfig, { default: () => ServerFields.make({}) }),
  runs: Schema.optionalWith(RunsConfig, { default: () => RunsConfig.make({}) }),
  log: Schema.optionalWith(LogConfig, { default: () => LogConfig.make({}) }),
  /** The Responses API's stored responses: in memory (default), on NATS JetStream key-value, or none. */
  responses: Schema.optionalWith(ResponsesConfig, { default: () => ResponsesConfig.make({}) }),
  /** Traces: exported over OTLP/HTTP when `otlp.endpoint` is set (`iop edge`, `iop node`). */
  telemetry: Schema.optionalWith(TelemetryConfig, { default: () => TelemetryConfig.make({}) }),
  models: Schema.optionalWith(
    Schema.Array(ModelConfig).pipe(Schema.filter(uniqueModelIds)),
    { default: () => [defaultEchoModel()] }
  ),
  /** Nodes on other machines, reached over NATS (`iop edge`), or the bus a node serves on (`iop node`). */
  bus: Schema.optional(BusConfig),
  /** `iop node` only: this node's id and capacity. */
  node: Schema.optional(NodeSettings)
})
export type EdgeConfigShape = typeof EdgeConfigSchema.Type

function defaultEchoModel(): ModelConfig {
  return ModelConfig.make({ id: "echo", provider: { type: "echo", tokenDelayMs: 15 } })
}

/** The embedded default: one `echo` model, everything else at its default. */
export const defaultConfig = (): EdgeConfigShape => Schema.decodeUnknownSync(EdgeConfigSchema)({})

/** The edge's configuration as a service. */
export class EdgeConfig extends Context.Tag("@iop/edge/EdgeConfig")<EdgeConfig, EdgeConfigShape>() {}

export const layer = (config: EdgeConfigShape): Layer.Layer<EdgeConfig> => Layer.succeed(EdgeConfig, config)
