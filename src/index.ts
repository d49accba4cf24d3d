/**
 * iop edge as a library: mount the edge's routes in your own Effect HTTP
 * server, or call `ChatCompletions` / `RunService` directly.
 *
 * The public surface is decided (docs/library.md, "The public surface"; test/library/exports.test.ts holds it):
 * the edge's layers and config, the typed API, the services below it, the provider door and run events, the
 * error unions. Everything else is internal.
 *
 * The typed Chat Completions API is the `ChatCompletions` namespace: the service `ChatCompletions.ChatCompletions`
 * (`request`, `create`, `stream`) and the types of its signatures — `PreparedRequest`, `ChatCompletion`,
 * `ChatCompletionChunk` (and their parts; Schemas and types, also exported here at the top),
 * `ChatCompletionRequest`, `SubmitError` and `RunOutcomeError` (also here at the top; their members are in
 * `RunErrors` and `ChatErrors`), with `ChatErrors.ModelNotFound` and `EdgeErrors.InvalidRequest`.
 *
 * Entry points beside this one: `iop-edge/nats` (remote nodes), `iop-edge/testing` (the test kit) and
 * `iop-edge/ai` (`@effect/ai`'s `LanguageModel` in process). See docs/library.md.
 *
 * @example
 * ```ts
 * import { Edge } from "iop-edge"
 * const Main = Layer.unwrapEffect(Effect.map(Edge.httpApp, HttpServer.serve)).pipe(Layer.provide(Edge.layer({})))
 * ```
 */
export * as Edge from "./Edge.js"
export * as EdgeConfig from "./config/EdgeConfig.js"
export * as LoadConfig from "./config/loadConfig.js"
export { ApiKeySourceError } from "./config/apiKeys.js"
export * as ChatCompletions from "./dialects/chat-completions/ChatCompletions.js"
export * as ChatCompletionRequest from "./dialects/chat-completions/wire.js"
export { ChatCompletion, ChatCompletionChunk } from "./dialects/chat-completions/completion.js"
export * as ChatErrors from "./chat/errors.js"
export type { RunOutcomeError } from "./chat/errors.js"
export * as EdgeErrors from "./chat/EdgeError.js"
export * as RunService from "./run/RunService.js"
export * as ResponseStore from "./store/ResponseStore.js"
export * as Metrics from "./observability/Metrics.js"
export * as NodeRegistry from "./run/NodeRegistry.js"
export * as RunEvent from "./protocol/RunEvent.js"
export * as RunErrors from "./protocol/errors.js"
export type { SubmitError } from "./protocol/errors.js"
export * as SubmitRunRequest from "./protocol/SubmitRunRequest.js"
export * as RunSink from "./protocol/RunSink.js"
export * as ModelOptions from "./protocol/ModelOptions.js"
export * as Provider from "./providers/Provider.js"
export * as LocalNode from "./run/LocalNode.js"
export * as EchoProvider from "./providers/echo/Echo.js"
export * as OpenAiProvider from "./providers/openai/OpenAiProvider.js"
