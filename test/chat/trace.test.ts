import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Stream from "effect/Stream"
import * as ChatRun from "../../src/chat/ChatRun.js"
import { layer as responderLayer } from "../../src/chat/Responder.js"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { decodeBody, resolveChatRequest } from "../../src/dialects/chat-completions/request.js"
import { layerTest as metricsTestLayer } from "../../src/observability/Metrics.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"
import { sseBody } from "../support/chatCompletionsBodies.js"
import { ScriptedRunService } from "../../src/testing.js"

const run = (traceStreams: boolean, metadata: Record<string, string>) =>
  Effect.gen(function* () {
    const config = Either.getOrThrow(
      decodeConfigJson("t", { log: { traceStreams }, models: [{ id: "m", provider: { type: "echo" } }] })
    )
    const runs = ScriptedRunService.make([
      ScriptedRunService.events(RunEvent.delta("Hi"), RunEvent.delta("<|im_"), RunEvent.delta("end|>"), RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} }))
    ])
    const logs: Array<{ message: string; seq: unknown; type: unknown }> = []
    const logger = Logger.make(({ message, annotations }) => {
      const text = Array.isArray(message) ? String(message[0]) : String(message)
      logs.push({ message: text, seq: HashMap.get(annotations, "seq")._tag === "Some" ? HashMap.unsafeGet(annotations, "seq") : undefined, type: HashMap.get(annotations, "type")._tag === "Some" ? HashMap.unsafeGet(annotations, "type") : undefined })
    })
    const wire = yield* decodeBody(JSON.stringify({ model: "m", stream: true, metadata, messages: [{ role: "user", content: "x" }] }))
    const request = yield* resolveChatRequest(config, wire)
    yield* Effect.gen(function* () {
      yield* Stream.runDrain(yield* sseBody(request))
    }).pipe(
      Effect.scoped,
      Effect.provide(responderLayer.pipe(
        Layer.provide(ChatRun.layer({ toolValidationAttempts: 2, traceStreams })),
        Layer.provide(Layer.mergeAll(runs.layer, metricsTestLayer, EdgeConfig.layer(config)))
      )),
      Effect.provide(Logger.replace(Logger.defaultLogger, logger))
    )
    return logs.filter((l) => l.message.startsWith("stream output"))
  }).pipe(Effect.orDie)

describe("trace mode", () => {
  it.effect("logs every emitted chunk and every suppressed delta with a sequence number when allowed and asked", () =>
    Effect.gen(function* () {
      const traced = yield* run(true, { iop_trace_stream: "true" })
      expect(traced).toEqual([
        { message: "stream output chunk", seq: 1, type: "Content" },
        { message: "stream output suppressed", seq: 1, type: "Delta" },
        { message: "stream output suppressed", seq: 1, type: "Delta" },
        { message: "stream output chunk", seq: 2, type: "Finish" }
      ])
      expect(yield* run(false, { iop_trace_stream: "true" })).toEqual([])
      expect(yield* run(true, {})).toEqual([])
    })
  )
})
