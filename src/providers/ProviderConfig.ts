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
   * What the upstream can constrain: `llama.cpp` takes a GBNF `grammar`, so a text-mode request that must call a
   * tool (`tool_choice` required or named) or has a strict tool is sent the grammar of its legal answers, compiled
   * from its tools' JSON Schemas; `none` (the default) sends no constraint and relies on validation; `auto` is
   * `llama.cpp` when the upstream answers llama.cpp's `GET /props`, read by its node when it starts. Not the default
   * yet: it is one more request to every upstream at start, which an operator should choose.
   */
  constraints: Schema.optionalWith(Schema.Literal("auto", "llama.cpp", "none"), { default: () => "none" as const })
})

export const ProviderConfig = Schema.Union(EchoProviderConfig, OpenAiProviderConfig)
export type ProviderConfig = typeof ProviderConfig.Type
