import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import type { LogConfig } from "../config/EdgeConfig.js"

const levels: Record<LogConfig["level"], LogLevel.LogLevel> = {
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  error: LogLevel.Error,
  none: LogLevel.None
}

/** JSON lines on stdout (one object per line, with the fiber's log annotations), at the configured level. */
export const layer = (level: LogConfig["level"]): Layer.Layer<never> =>
  Layer.merge(Logger.json, Logger.minimumLogLevel(levels[level]))
