import * as FileSystem from "@effect/platform/FileSystem"
import * as Config from "effect/Config"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { type ApiKeyEntry, EdgeConfig, type EdgeConfigShape } from "./EdgeConfig.js"

/** Keys from a file: one per line, blank lines and `#` comments ignored. */
export const parseKeyFile = (text: string): ReadonlyArray<string> =>
  text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"))

/** Keys from an environment variable: comma-separated. */
export const parseKeyList = (text: string): ReadonlyArray<string> =>
  text
    .split(",")
    .map((k) => k.trim())
    .filter((k) => k !== "")

/**
 * A configured key source (`server.apiKeysFile` or `server.apiKeysEnv`) gives
 * no key: the edge must not start, since it would serve without authentication.
 * The message names the source, never a key or the source's content.
 */
export class ApiKeySourceError extends Data.TaggedError("ApiKeySourceError")<{
  readonly source: "apiKeysFile" | "apiKeysEnv"
  /** The file's path or the variable's name. */
  readonly name: string
  readonly problem: "unreadable" | "unset" | "no-key"
}> {
  override get message(): string {
    const where = `$.server.${this.source}`
    switch (this.problem) {
      case "unreadable":
        return `${where}: cannot read "${this.name}"`
      case "unset":
        return `${where}: the variable ${this.name} is not set`
      case "no-key":
        return this.source === "apiKeysFile"
          ? `${where}: "${this.name}" holds no API key (only blank lines and # comments); the edge will not start without authentication`
          : `${where}: the variable ${this.name} holds no API key (it is empty or only commas and blanks); the edge will not start without authentication`
    }
  }
}

const nonEmpty = (
  source: ApiKeySourceError["source"],
  name: string,
  keys: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<string>, ApiKeySourceError> =>
  keys.length === 0 ? Effect.fail(new ApiKeySourceError({ source, name, problem: "no-key" })) : Effect.succeed(keys)

/**
 * Adds the keys of `server.apiKeysFile` and `server.apiKeysEnv` to
 * `server.apiKeys` and drops both sources, so the result needs no resolving
 * again. A file that cannot be read, a variable that is not set, or a source
 * that yields no key fails: the edge must not start open by accident.
 */
export const resolveApiKeys = (
  config: EdgeConfigShape
): Effect.Effect<EdgeConfigShape, ApiKeySourceError, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const { apiKeysFile, apiKeysEnv, ...server } = config.server
    if (apiKeysFile === undefined && apiKeysEnv === undefined) return config
    const extra: Array<ApiKeyEntry> = []
    if (apiKeysFile !== undefined) {
      const fs = yield* FileSystem.FileSystem
      const text = yield* fs
        .readFileString(apiKeysFile)
        .pipe(Effect.mapError(() => new ApiKeySourceError({ source: "apiKeysFile", name: apiKeysFile, problem: "unreadable" })))
      const keys = yield* nonEmpty("apiKeysFile", apiKeysFile, parseKeyFile(text))
      extra.push(...keys.map((k) => Redacted.make(k)))
    }
    if (apiKeysEnv !== undefined) {
      const value = yield* Config.option(Config.string(apiKeysEnv)).pipe(Effect.orElseSucceed(() => Option.none()))
      if (Option.isNone(value)) {
        return yield* Effect.fail(new ApiKeySourceError({ source: "apiKeysEnv", name: apiKeysEnv, problem: "unset" }))
      }
      const keys = yield* nonEmpty("apiKeysEnv", apiKeysEnv, parseKeyList(value.value))
      extra.push(...keys.map((k) => Redacted.make(k)))
    }
    return { ...config, server: { ...server, apiKeys: [...config.server.apiKeys, ...extra] } }
  })

/**
 * The config with its key sources resolved (see `resolveApiKeys`), for the
 * layers that build the edge: whoever builds it, the keys are enforced.
 */
export const layer: Layer.Layer<EdgeConfig, ApiKeySourceError, EdgeConfig | FileSystem.FileSystem> = Layer.effect(
  EdgeConfig,
  EdgeConfig.pipe(Effect.flatMap(resolveApiKeys))
)
