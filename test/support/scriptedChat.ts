/**
 * The chat plane over a scripted run service, for tests of what the chat plane does with a run's events: three
 * echo models (`plain` by the name given, `strict`, `buffered` = strict + stream buffer), a `get_weather` tool,
 * requests decoded as `POST /v1/chat/completions` decodes them, and the response path on top.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ChatRun from "../../src/chat/ChatRun.js"
import { layer as responderLayer } from "../../src/chat/Responder.js"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { decodeBody, resolveChatRequest } from "../../src/dialects/chat-completions/request.js"
import { layerTest as metricsTestLayer } from "../../src/observability/Metrics.js"
import type { RunService } from "../../src/run/RunService.js"
import { ScriptedRunService } from "../../src/testing.js"

export const weather = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
  }
}

export const scriptedChat = (options: {
  /** The id of the model that is neither strict nor buffered. */
  readonly plain: string
  readonly toolValidationAttempts: number
  /** Fields every request has unless it says otherwise (e.g. `tools`). */
  readonly defaults?: Record<string, unknown>
}) => {
  const config = Either.getOrThrow(
    decodeConfigJson("test", {
      models: [
        { id: options.plain, provider: { type: "echo" } },
        { id: "strict", provider: { type: "echo" }, output: { strict: true } },
        { id: "buffered", provider: { type: "echo" }, output: { strict: true, streamBuffer: true } }
      ]
    })
  )
  const request = (body: Record<string, unknown>) =>
    Effect.gen(function* () {
      const wire = yield* decodeBody(JSON.stringify({ messages: [{ role: "user", content: "hi" }], ...options.defaults, ...body }))
      return yield* resolveChatRequest(config, wire)
    }).pipe(Effect.orDie)
  const chatLayer = ChatRun.layer({ toolValidationAttempts: options.toolValidationAttempts, traceStreams: false })
  /** The response path and the chat plane over runs that play `scripts` (`wrap` may stand between them). */
  const setup = (
    scripts: ReadonlyArray<ScriptedRunService.Script>,
    wrap: (runs: Layer.Layer<RunService>) => Layer.Layer<RunService> = (runs) => runs
  ) => {
    const runs = ScriptedRunService.make(scripts)
    const layer = responderLayer.pipe(
      Layer.provideMerge(chatLayer),
      Layer.provideMerge(Layer.mergeAll(wrap(runs.layer), metricsTestLayer, EdgeConfig.layer(config)))
    )
    return { runs, layer }
  }
  return { config, request, setup }
}
