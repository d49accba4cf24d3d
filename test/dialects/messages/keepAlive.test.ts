import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as ChatRun from "../../../src/chat/ChatRun.js"
import * as EdgeConfig from "../../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../../src/config/loadConfig.js"
import * as Messages from "../../../src/dialects/messages/Messages.js"
import { KEEP_ALIVE_AFTER_MS } from "../../../src/dialects/Dialect.js"
import { Responder, layer as responderLayer } from "../../../src/chat/Responder.js"
import { layerTest as metricsTestLayer } from "../../../src/observability/Metrics.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import { ScriptedRunService } from "../../../src/testing.js"

const config = Either.getOrThrow(decodeConfigJson("test", { models: [{ id: "m", provider: { type: "echo" } }] }))
const model = config.models[0]!

const wire = Either.getOrThrow(
  Messages.dialect.decode(JSON.stringify({ model: "m", max_tokens: 16, stream: true, messages: [{ role: "user", content: "hi" }] }))
)
const request = Either.getOrThrow(Messages.dialect.toChatRequest(wire, model, { maxToolSchemaBytes: 1 << 20 }))

/** One turn of Node's event loop: the body's pushes reach its `data` listener (no time passes on any clock). */
const turn = Effect.zipRight(Effect.yieldNow(), Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))))

const pings = (text: string) => text.split("event: ping\n").length - 1

describe("Messages keep-alive", () => {
  it.scoped("a silent run gets a ping after KEEP_ALIVE_AFTER_MS of silence, by the Clock, and none before", () => {
    // One token, then the run says nothing more (the upstream is thinking).
    const runs = ScriptedRunService.make([ScriptedRunService.eventStream(Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.never)))])
    const layer = responderLayer.pipe(
      Layer.provideMerge(ChatRun.layer({ toolValidationAttempts: 1, traceStreams: false })),
      Layer.provideMerge(Layer.mergeAll(runs.layer, metricsTestLayer, EdgeConfig.layer(config)))
    )
    return Effect.gen(function* () {
      const responder = yield* Responder
      const body = yield* responder.stream(request, (run) => Messages.dialect.streamRenderer(wire, request, run))
      let text = ""
      body.on("data", (chunk: Buffer) => {
        text += chunk.toString("utf8")
      })
      yield* turn
      // message_start is followed by its own ping; then the text block.
      expect(pings(text)).toBe(1)
      expect(text).toContain("text_delta")
      yield* TestClock.adjust(KEEP_ALIVE_AFTER_MS - 1)
      yield* turn
      expect(pings(text)).toBe(1)
      yield* TestClock.adjust(1)
      yield* turn
      expect(pings(text)).toBe(2)
      yield* TestClock.adjust(KEEP_ALIVE_AFTER_MS)
      yield* turn
      expect(pings(text)).toBe(3)
      expect(text).not.toContain("message_stop")
    }).pipe(Effect.provide(layer))
  })
})
