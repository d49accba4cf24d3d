import * as FileSystem from "@effect/platform/FileSystem"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { EdgeConfigSchema, type EdgeConfigShape } from "./EdgeConfig.js"
import { primaryIssue } from "../common/parseIssues.js"

/** The config file cannot be used; the message names the file, the JSON path and what was expected. */
export class InvalidConfig extends Data.TaggedError("InvalidConfig")<{ readonly file: string; readonly detail: string }> {
  override get message(): string {
    return `${this.file}: ${this.detail}`
  }
}

const decodeConfig = Schema.decodeUnknownEither(EdgeConfigSchema, { onExcessProperty: "error", errors: "all" })

/** Decodes already-parsed JSON; `file` names the source in errors. */
export const decodeConfigJson = (file: string, json: unknown): Either.Either<EdgeConfigShape, InvalidConfig> =>
  Either.mapLeft(decodeConfig(json), (e) => {
    const issue = primaryIssue(e, "$", "short")
    return new InvalidConfig({ file, detail: issue === undefined ? "invalid config" : `${issue.path}: ${issue.message}` })
  })

export const parseConfigText = (file: string, text: string): Either.Either<EdgeConfigShape, InvalidConfig> => {
  const json = parseJson(text)
  return Either.isLeft(json)
    ? Either.left(new InvalidConfig({ file, detail: `not valid JSON (${json.left})` }))
    : decodeConfigJson(file, json.right)
}

const parseJson = (text: string): Either.Either<unknown, string> => {
  try {
    return Either.right(JSON.parse(text))
  } catch (e) {
    return Either.left(e instanceof Error ? e.message : String(e))
  }
}

export const loadConfigFile = (file: string): Effect.Effect<EdgeConfigShape, InvalidConfig, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs
      .readFileString(file)
      .pipe(Effect.mapError((e) => new InvalidConfig({ file, detail: `cannot read the file (${e.message})` })))
    return yield* parseConfigText(file, text)
  })

/** Command-line flags override the file. */
export interface ConfigOverrides {
  readonly host?: string | undefined
  readonly port?: number | undefined
  readonly logLevel?: EdgeConfigShape["log"]["level"] | undefined
}

export const applyOverrides = (config: EdgeConfigShape, overrides: ConfigOverrides): EdgeConfigShape => ({
  ...config,
  server: {
    ...config.server,
    ...(overrides.host !== undefined ? { host: overrides.host } : {}),
    ...(overrides.port !== undefined ? { port: overrides.port } : {})
  },
  log: overrides.logLevel !== undefined ? { ...config.log, level: overrides.logLevel } : config.log
})
