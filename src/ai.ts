/**
 * `iop-edge/ai`: `@effect/ai`'s `LanguageModel` served by the edge in this process, with no HTTP between them.
 * `layer(model)` provides `LanguageModel.LanguageModel` over the edge's `ChatCompletions` (from `Edge.layer`,
 * `Edge.layerFrom` or the test kit's `TestEdge.layer`): `LanguageModel.generateText`, `streamText`,
 * `generateObject` and `Toolkit` calls run as the edge's runs — its tool-call parsing and validation, strict
 * replays, timeouts, cancellation, limits, log level and metrics. The edge's failures are `AiError`s that keep the
 * edge's error (its tag and message in `description`, the error as `cause`).
 *
 * Its own entry point, so that the root import never loads `@effect/ai` (an optional peer dependency).
 *
 * @example
 * ```ts
 * import * as LanguageModel from "@effect/ai/LanguageModel"
 * import { Edge } from "iop-edge"
 * import * as EdgeAi from "iop-edge/ai"
 * const answer = LanguageModel.generateText({ prompt: "hi" }).pipe(
 *   Effect.provide(EdgeAi.layer("echo")),
 *   Effect.provide(Edge.layer({ models: [{ id: "echo", provider: { type: "echo" } }] }))
 * )
 * ```
 */
export { type Config, layer, make } from "./ai/EdgeLanguageModel.js"
