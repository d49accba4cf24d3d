import * as Schema from "effect/Schema"

/** The built-in providers' settings, as a model's `provider` in the config file. */

export const EchoProviderConfig = Schema.Struct({
  type: Schema.Literal("echo"),
  /** Delay between echoed tokens, to look like a model (0: as fast as possible). */
  tokenDelayMs: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()), { default: () => 15 })
})

export const OpenAiProviderConfig = Schema.Struct({
  type: Schema.Literal("openai"),
  baseUrl: Schema.String.pipe(Schema.pattern(/^https?:\/\//, { message: () => "an http:// or https:// URL" })),
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

export const ProviderConfig = Schema.Union(EchoProviderConfig, OpenAiProviderConfig)
export type ProviderConfig = typeof ProviderConfig.Type
