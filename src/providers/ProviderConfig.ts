import * as Schema from "effect/Schema"

/** The built-in providers' settings, as a model's `provider` in the config file. */

export const EchoProviderConfig = Schema.Struct({
  type: Schema.Literal("echo"),
  /** Delay between echoed tokens, to look like a model (0: as fast as possible). */
  tokenDelayMs: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()), { default: () => 15 })
})

const UpstreamUrl = Schema.String.pipe(Schema.pattern(/^https?:\/\//, { message: () => "an http:// or https:// URL" }))

/** One of a model's upstream servers (`baseUrls`): its base URL, alone or with its name and capacity. */
export const ReplicaConfig = Schema.Union(
  UpstreamUrl,
  Schema.Struct({
    url: UpstreamUrl,
    /** Its name in logs and metrics: the replica's node is `<model id>@<name>` (default: the URL's host:port). */
    name: Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._:-]+$/, {
      message: () => "letters, digits, '.', '_', ':' and '-'"
    }))),
    /**
     * Runs it takes at once (its server's slots: llama.cpp's `-np`); more go to another replica, or get 429 when
     * every replica is full. Unset: no bound at the edge (the server queues).
     */
    slots: Schema.optional(Schema.Int.pipe(Schema.positive())),
    /** Its share of the load when `slots` is not set (default 1): runs in flight per unit of weight are compared. */
    weight: Schema.optional(Schema.Number.pipe(Schema.positive()))
  })
)
export type ReplicaConfig = typeof ReplicaConfig.Type

/** `healthCheck`: ask every replica's `GET {root}{path}` every `intervalMs`: a 200 is healthy, anything else ejects it. */
export const HealthCheckConfig = Schema.Struct({
  /** Beside the base URL's root (without `/v1`): llama.cpp and vLLM answer `/health`, Ollama `/` (default `/health`). */
  path: Schema.optionalWith(Schema.String.pipe(Schema.pattern(/^\//, { message: () => "a path starting with /" })), {
    default: () => "/health"
  }),
  intervalMs: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => 5_000 }),
  /** An answer that takes longer is a failed check. */
  timeoutMs: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => 2_000 })
})
export type HealthCheckConfig = typeof HealthCheckConfig.Type

const OpenAiProviderFields = Schema.Struct({
  type: Schema.Literal("openai"),
  /** The upstream's base URL (ending in `/v1` for most servers); `baseUrls` instead for several replicas. */
  baseUrl: Schema.optional(UpstreamUrl),
  /**
   * Several servers of the same model (replicas): each is a node of the model, and its runs are routed among them
   * by the model's `routing` (prefix affinity by default), ejected while failing.
   */
  baseUrls: Schema.optional(Schema.NonEmptyArray(ReplicaConfig)),
  /** Active health checks of the replicas (default: none; a replica is still ejected while its runs fail). */
  healthCheck: Schema.optional(HealthCheckConfig),
  /** The upstream's model name; defaults to the model's `id`. */
  model: Schema.optional(Schema.String),
  apiKey: Schema.optional(Schema.Redacted(Schema.String)),
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  /**
   * Fields added to every upstream request body: an upstream's own parameters (llama.cpp's `grammar`, `top_k`,
   * `chat_template_kwargs`). What the edge sends from the request itself is never overridden.
   */
  extraBody: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  /**
   * What the upstream can constrain, for a request that must call a tool or is strict (a strict model or tool):
   * `llama.cpp` (a GBNF `grammar`), `vllm` (the same grammar as its structured output), `ollama` (a JSON Schema of
   * the answer, through `response_format`), `none` (validation only), or `auto` (the default): asked of the
   * upstream on the first request that needs it (`GET /props`, `/version`, `/api/version`), then kept.
   */
  constraints: Schema.optionalWith(Schema.Literal("auto", "llama.cpp", "vllm", "ollama", "none"), {
    default: () => "auto" as const
  })
})

/** One upstream or several, not both. */
const oneWayToTheUpstream = (p: typeof OpenAiProviderFields.Type) =>
  p.baseUrl !== undefined && p.baseUrls !== undefined
    ? { path: ["baseUrls"], message: "set baseUrl (one upstream) or baseUrls (replicas), not both" }
    : p.baseUrl === undefined && p.baseUrls === undefined
    ? { path: ["baseUrl"], message: "is missing (or set baseUrls, for several replicas)" }
    : true

export const OpenAiProviderConfig = OpenAiProviderFields.pipe(Schema.filter(oneWayToTheUpstream))
export type OpenAiProviderConfig = typeof OpenAiProviderConfig.Type

/** A replica of a model's upstream, its defaults filled in. */
export interface Replica {
  readonly url: string
  /** Unique among the model's replicas. */
  readonly name: string
  readonly slots: number | undefined
  readonly weight: number | undefined
}

const hostOf = (url: string): string => (URL.canParse(url) ? new URL(url).host : url)

/** The provider's upstream servers: its `baseUrl`, or each of its `baseUrls` (names made unique by their position). */
export const replicasOf = (p: OpenAiProviderConfig): ReadonlyArray<Replica> => {
  const listed = p.baseUrls ?? (p.baseUrl === undefined ? [] : [p.baseUrl])
  const replicas = listed.map((r): Replica =>
    typeof r === "string"
      ? { url: r, name: hostOf(r), slots: undefined, weight: undefined }
      : { url: r.url, name: r.name ?? hostOf(r.url), slots: r.slots, weight: r.weight }
  )
  const count = new Map<string, number>()
  for (const r of replicas) count.set(r.name, (count.get(r.name) ?? 0) + 1)
  return replicas.map((r, i) => ((count.get(r.name) ?? 0) > 1 ? { ...r, name: `${r.name}#${i + 1}` } : r))
}

export const ProviderConfig = Schema.Union(EchoProviderConfig, OpenAiProviderConfig)
export type ProviderConfig = typeof ProviderConfig.Type
