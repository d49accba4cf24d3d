/**
 * What kind of server an OpenAI-compatible upstream is, as far as constraining its output goes — llama.cpp (a GBNF
 * `grammar`), vLLM (the same GBNF as a structured-output grammar), Ollama (a JSON Schema, through
 * `response_format`), or none the edge knows — and what the upstream's own answers say of it. Pure.
 */

export type UpstreamKind =
  | { readonly _tag: "LlamaCpp" }
  | { readonly _tag: "Vllm"; readonly version: string | undefined }
  | { readonly _tag: "Ollama"; readonly version: string | undefined }
  | { readonly _tag: "None" }

export const LLAMA_CPP: UpstreamKind = { _tag: "LlamaCpp" }
export const NO_KIND: UpstreamKind = { _tag: "None" }
export const vllm = (version: string | undefined): UpstreamKind => ({ _tag: "Vllm", version })
export const ollama = (version: string | undefined): UpstreamKind => ({ _tag: "Ollama", version })

/** A provider's `constraints` setting. */
export type ConstraintsSetting = "auto" | "llama.cpp" | "vllm" | "ollama" | "none"

/** The kind a setting names; undefined for `auto` (found out from the upstream). */
export const configuredKind = (setting: ConstraintsSetting): UpstreamKind | undefined => {
  switch (setting) {
    case "auto":
      return undefined
    case "llama.cpp":
      return LLAMA_CPP
    case "vllm":
      return vllm(undefined)
    case "ollama":
      return ollama(undefined)
    case "none":
      return NO_KIND
  }
}

export const describeKind = (kind: UpstreamKind): string => {
  switch (kind._tag) {
    case "LlamaCpp":
      return "llama.cpp"
    case "Vllm":
      return kind.version === undefined ? "vllm" : `vllm ${kind.version}`
    case "Ollama":
      return kind.version === undefined ? "ollama" : `ollama ${kind.version}`
    case "None":
      return "none"
  }
}

/** llama-server names itself in the `Server` header of every answer. */
export const isLlamaCppServer = (server: string | ReadonlyArray<string> | undefined): boolean =>
  (typeof server === "string" ? server : server?.[0] ?? "").toLowerCase().startsWith("llama.cpp")

/** `{"version": "x.y.z"}` (vLLM's `GET /version`, Ollama's `GET /api/version`): the version; else undefined. */
export const versionOf = (json: unknown): string | undefined => {
  if (typeof json !== "object" || json === null || !("version" in json)) return undefined
  const version = json.version
  return typeof version === "string" && version !== "" ? version : undefined
}

const numbers = (version: string): ReadonlyArray<number> | undefined => {
  const m = /^v?(\d+)\.(\d+)(?:\.(\d+))?/.exec(version.trim())
  return m === null ? undefined : [Number(m[1]), Number(m[2]), Number(m[3] ?? "0")]
}

/**
 * vLLM takes `structured_outputs: {grammar}` from 0.10.2 on (its `guided_*` fields were removed in 0.12.0), only
 * `guided_grammar` before. An unknown or unreadable version is taken for a current one.
 */
export const takesStructuredOutputs = (version: string | undefined): boolean => {
  const v = version === undefined ? undefined : numbers(version)
  if (v === undefined) return true
  const [major = 0, minor = 0, patch = 0] = v
  return major > 0 || minor > 10 || (minor === 10 && patch >= 2)
}

/** The upstream's root: its base URL without a trailing `/v1` (where llama.cpp's `/props` and vLLM's `/version` are). */
export const rootOf = (baseUrl: string): string => baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "")
