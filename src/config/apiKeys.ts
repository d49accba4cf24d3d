import * as FileSystem from "@effect/platform/FileSystem"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type { ApiKeyEntry, EdgeConfigShape } from "./EdgeConfig.js"
import { ConfigError } from "./loadConfig.js"

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
 * Adds the keys of `server.apiKeysFile` and `server.apiKeysEnv` to the
 * config's, at start. A file that cannot be read or a variable that is not
 * set is a config error (the edge must not start open by accident).
 */
export const resolveApiKeys = (
  file: string,
  config: EdgeConfigShape
): Effect.Effect<EdgeConfigShape, ConfigError, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const extra: Array<ApiKeyEntry> = []
    const { apiKeysFile, apiKeysEnv } = config.server
    if (apiKeysFile !== undefined) {
      const fs = yield* FileSystem.FileSystem
      const text = yield* fs.readFileString(apiKeysFile).pipe(
        Effect.mapError(
          () => new ConfigError({ file, detail: `$.server.apiKeysFile: cannot read "${apiKeysFile}"` })
        )
      )
      extra.push(...parseKeyFile(text).map((k) => Redacted.make(k)))
    }
    if (apiKeysEnv !== undefined) {
      const value = yield* Config.option(Config.string(apiKeysEnv)).pipe(Effect.orElseSucceed(() => Option.none()))
      if (Option.isNone(value)) {
        return yield* Effect.fail(
          new ConfigError({ file, detail: `$.server.apiKeysEnv: the variable ${apiKeysEnv} is not set` })
        )
      }
      extra.push(...parseKeyList(value.value).map((k) => Redacted.make(k)))
    }
    return extra.length === 0 ? config : { ...config, server: { ...config.server, apiKeys: [...config.server.apiKeys, ...extra] } }
  })
