/**
 * iop edge as a library: mount the edge's routes in your own Effect HTTP
 * server, or call `ChatCompletions` / `RunService` directly.
 *
 * The typed Chat Completions API is the `ChatCompletions` namespace: the service `ChatCompletions.ChatCompletions`
 * (`request`, `create`, `stream`) and the types of its signatures — `ChatCompletion`, `ChatCompletionChunk` (and
 * their parts; Schemas and types, also exported here at the top), `ChatRequest`, `ChatCompletionRequest`,
 * `SubmitError` and `RunOutcomeError` (also here at the top; their members are in `RunErrors` and `ChatErrors`),
 * with `ChatErrors.ModelNotFound` and `HttpErrors.InvalidRequest`.
 *
 * Entry points beside this one: `iop-edge/nats` (remote nodes) and `iop-edge/testing` (the test kit). See
 * docs/library.md.
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
export * as ChatCompletionsRender from "./dialects/chat-completions/render.js"
export { ChatCompletion, ChatCompletionChunk } from "./dialects/chat-completions/completion.js"
export * as Chat from "./chat/ChatRun.js"
export * as ChatRequest from "./chat/ChatRequest.js"
export * as ChatErrors from "./chat/errors.js"
export type { RunOutcomeError } from "./chat/errors.js"
export * as Session from "./chat/session.js"
export * as Policy from "./chat/policy.js"
export * as RunService from "./run/RunService.js"
export * as RunEvent from "./protocol/RunEvent.js"
export * as RunErrors from "./protocol/errors.js"
export type { SubmitError } from "./protocol/errors.js"
export * as SubmitRunRequest from "./protocol/SubmitRunRequest.js"
export * as NodeRegistry from "./run/NodeRegistry.js"
export * as RunSink from "./protocol/RunSink.js"
export * as InProcessTransport from "./run/InProcess.js"
export * as Node from "./node/Node.js"
export * as LocalNode from "./run/LocalNode.js"
export * as EmbeddedNode from "./run/EmbeddedNode.js"
export * as Provider from "./providers/Provider.js"
export * as EchoProvider from "./providers/echo/Echo.js"
export * as OpenAiProvider from "./providers/openai/OpenAiProvider.js"
export * as Metrics from "./observability/Metrics.js"
export * as HttpEdge from "./http/HttpLive.js"
export * as OpenAiError from "./dialects/openaiError.js"
export * as HttpErrors from "./chat/EdgeError.js"
export * as ChatCompletionRequest from "./dialects/chat-completions/wire.js"
// Every module a public signature above names, so that each of its types can be imported.
export * as Responder from "./chat/Responder.js"
export * as Dialect from "./dialects/Dialect.js"
export * as Lifecycle from "./http/Lifecycle.js"
export * as Limits from "./chat/Limits.js"
export * as Listener from "./http/Listener.js"
export * as RouteLabel from "./observability/routeLabel.js"
export * as RunChannel from "./run/RunChannel.js"
export * as ToolCallTypes from "./chat/toolcalls/types.js"
export * as HoldbackFilter from "./chat/filters/holdback.js"
export * as SentinelFilter from "./chat/filters/sentinel.js"
export * as ThinkFilter from "./chat/filters/think.js"
export * as Logprobs from "./chat/logprobs.js"
export * as BuildChatRequest from "./chat/buildChatRequest.js"
export * as Auth from "./http/Auth.js"
export * as ToolCallRegistry from "./chat/toolcalls/registry.js"
export * as TagScan from "./chat/toolcalls/tagScan.js"
export * as ToolCallBlock from "./chat/toolcalls/block.js"
