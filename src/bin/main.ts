#!/usr/bin/env node
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Args from "@effect/cli/Args"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as JSONSchema from "effect/JSONSchema"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { EdgeConfigSchema, defaultConfig } from "../config/EdgeConfig.js"
import { applyOverrides, InvalidConfig, loadConfigFile } from "../config/loadConfig.js"
import { layerServer } from "../nats.js"
import * as NodeServer from "../node/nats/NodeServer.js"

import * as Logging from "../observability/Logging.js"
import * as Telemetry from "../observability/Telemetry.js"

const VERSION = "0.1.0"

/** Where the logs go: `log.format: "auto"` is readable lines on a terminal, in colour unless `NO_COLOR` is set. */
const stdoutOutput = (): Logging.LogOutput => {
  const isTTY = process.stdout.isTTY === true
  return { isTTY, colors: isTTY && (process.env["NO_COLOR"] ?? "") === "" }
}

const configOption = Options.file("config", { exists: "either" }).pipe(
  Options.withDescription("JSON config file (default: $IOP_CONFIG, else the embedded echo-only default)"),
  Options.optional
)
const host = Options.text("host").pipe(Options.withDescription("address to listen on (overrides server.host)"), Options.optional)
const port = Options.integer("port").pipe(Options.withDescription("port to listen on (overrides server.port)"), Options.optional)
const logLevel = Options.choice("log-level", ["debug", "info", "warn", "error", "none"]).pipe(
  Options.withDescription("log level (overrides log.level)"),
  Options.optional
)

/** The config file: `--config`, else `IOP_CONFIG`, else none (the embedded default). */
const chooseFile = (file: Option.Option<string>) =>
  Config.option(Config.nonEmptyString("IOP_CONFIG")).pipe(Effect.map((fromEnv) => Option.orElse(file, () => fromEnv)))

const resolveConfig = (file: Option.Option<string>) =>
  Effect.gen(function* () {
    const chosen = yield* chooseFile(file)
    if (Option.isNone(chosen)) return defaultConfig()
    return yield* loadConfigFile(chosen.value)
  })

const edge = Command.make("edge", { config: configOption, host, port, logLevel }, (flags) =>
  Effect.gen(function* () {
    const config = applyOverrides(yield* resolveConfig(flags.config), {
      host: Option.getOrUndefined(flags.host),
      port: Option.getOrUndefined(flags.port),
      logLevel: Option.getOrUndefined(flags.logLevel)
    })
    const file = Option.getOrElse(yield* chooseFile(flags.config), () => "config")
    // The layers resolve the key sources (before listening); a source without keys is a bad config: exit 2.
    return yield* Layer.launch(layerServer(config)).pipe(
      Effect.catchTag("ApiKeySourceError", (e) => Effect.fail(new InvalidConfig({ file, detail: e.message }))),
      Effect.provide(Logging.layer(config.log, stdoutOutput()))
    )
  })
).pipe(Command.withDescription("Serve the OpenAI-compatible API with an embedded node for the config's models."))

const node = Command.make("node", { config: configOption, logLevel }, (flags) =>
  Effect.gen(function* () {
    const config = applyOverrides(yield* resolveConfig(flags.config), { logLevel: Option.getOrUndefined(flags.logLevel) })
    const file = Option.getOrElse(flags.config, () => "config")
    if (config.bus === undefined) return yield* Effect.fail(new InvalidConfig({ file, detail: "$.bus: missing (required by iop node)" }))
    if (config.node === undefined) return yield* Effect.fail(new InvalidConfig({ file, detail: "$.node: missing (required by iop node)" }))
    const layer = NodeServer.layer({
      bus: config.bus,
      node: config.node,
      models: config.models,
      drainTimeoutMs: config.server.shutdownGraceMs
    }).pipe(Layer.provide(NodeHttpClient.dispatcherLayer), Telemetry.provide(config.telemetry, "iop-node"))
    return yield* Layer.launch(layer).pipe(Effect.provide(Logging.layer(config.log, stdoutOutput())))
  })
).pipe(Command.withDescription("Serve the config's models to edges over the message bus (`bus`, `node`)."))

const schema = Command.make("schema", {}, () =>
  Console.log(JSON.stringify({ ...JSONSchema.make(EdgeConfigSchema), title: "iop edge config" }, null, 2))
).pipe(Command.withDescription("Print the config file's JSON Schema (for editor completion)."))

const check = Command.make("check", { file: Args.text({ name: "FILE" }) }, ({ file }) =>
  loadConfigFile(file).pipe(Effect.zipRight(Console.log(`${file}: ok`)))
).pipe(Command.withDescription("Validate a config file; exit code 2 and the offending JSON path if it is bad."))

const configCommand = Command.make("config").pipe(
  Command.withDescription("Work with config files."),
  Command.withSubcommands([schema, check])
)

const iop = Command.make("iop").pipe(
  Command.withDescription("iop edge: an OpenAI-compatible edge that runs every chat completion as a run on a node."),
  Command.withSubcommands([edge, node, configCommand])
)

const cli = Command.run(iop, { name: "iop", version: VERSION })

/** Exit 2 for a bad config (before listening), 1 for other failures, 0 after a signal-driven shutdown. */
const exitCode = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return 0
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure) && hasTag(failure.value, "InvalidConfig")) return 2
  if (Option.isSome(failure) && hasTag(failure.value, "ValidationError")) return 2
  return 1
}

const hasTag = (u: unknown, tag: string): boolean =>
  typeof u === "object" && u !== null && "_tag" in u && u._tag === tag

const program = cli(process.argv).pipe(
  Effect.tapErrorTag("InvalidConfig", (e) => Console.error(`iop: bad config: ${e.message}`)),
  Effect.tapErrorTag("ServeError", (e) => Console.error(`iop: cannot listen: ${String(e.cause)}`)),
  Effect.tapErrorTag("BusConnectFailed", (e) => Console.error(`iop: ${e.message}`)),
  Effect.provide(NodeContext.layer)
)

NodeRuntime.runMain(program, {
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) => onExit(exitCode(exit))
})
