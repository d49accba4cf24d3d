import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as ChatRun from "../../src/chat/ChatRun.js"
import { RunFailed, RunTimedOut } from "../../src/chat/errors.js"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { layer as responderLayer } from "../../src/chat/Responder.js"
import { sseError } from "../../src/dialects/chat-completions/render.js"
import { decodeBody, resolveChatRequest } from "../../src/dialects/chat-completions/request.js"
import { layerTest as metricsTestLayer } from "../../src/observability/Metrics.js"
import { NodeDisconnected, RunCancelled, RunIdle, StreamClosed } from "../../src/protocol/errors.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"
import { sseBody } from "../support/chatCompletionsBodies.js"
import { ScriptedRunService } from "../../src/testing.js"

/** RunFailed keeps the run-plane error it was made from: the client reads the same message, the log names it. */

const nodeGone = new NodeDisconnected({ nodeId: RunEvent.NodeId.make("n1") })

describe("RunFailed keeps its cause", () => {
  it("runOutcome: node disconnected, stream closed, cancelled → RunFailed with that error as its cause", () => {
    for (const error of [nodeGone, new StreamClosed(), new RunCancelled({ reason: "edge shutting down" })]) {
      const failed = ChatRun.runOutcome(error)
      expect(failed).toBeInstanceOf(RunFailed)
      expect(failed._tag === "RunFailed" && failed.cause).toBe(error)
      // Effect's errors hand a `cause` field to the native Error as well.
      expect(failed instanceof Error && failed.cause).toBe(error)
      // What the client is told does not change.
      expect(failed.message).toBe(error.message)
      expect(sseError(failed)).toEqual({ error: { type: "run_error", message: error.message } })
    }
    expect(ChatRun.runOutcome(new RunIdle({ idleMs: 5 }))).toEqual(new RunTimedOut({ bound: "idle", ms: 5 }))
    expect(new RunFailed({ reason: "upstream error: x" }).cause).toBeUndefined()
  })

  it.effect("the run's log line names the cause; the stream's error event is as before", () =>
    Effect.gen(function* () {
      const config = Either.getOrThrow(decodeConfigJson("t", { models: [{ id: "m", provider: { type: "echo" } }] }))
      const runs = ScriptedRunService.make([ScriptedRunService.eventStream(Stream.make(RunEvent.delta("a")).pipe(Stream.concat(Stream.fail(nodeGone))))])
      const finished: Array<HashMap.HashMap<string, unknown>> = []
      const logger = Logger.make(({ annotations, message }) => {
        if ((Array.isArray(message) ? message[0] : message) === "run finished") finished.push(annotations)
      })
      const wire = yield* decodeBody(JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "x" }] }))
      const request = yield* resolveChatRequest(config, wire)
      const body = yield* Effect.gen(function* () {
        return yield* Stream.mkString(Stream.decodeText(yield* sseBody(request)))
      }).pipe(
        Effect.scoped,
        Effect.provide(responderLayer.pipe(
          Layer.provide(ChatRun.layer({ toolValidationAttempts: 2, traceStreams: false })),
          Layer.provide(Layer.mergeAll(runs.layer, metricsTestLayer, EdgeConfig.layer(config)))
        )),
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
      expect(body).toContain(`data: {"error":{"type":"run_error","message":"node disconnected"}}\n\ndata: [DONE]\n\n`)
      expect(finished).toHaveLength(1)
      const line = finished[0] ?? HashMap.empty()
      expect(HashMap.get(line, "error")).toEqual(Option.some("node disconnected"))
      expect(HashMap.get(line, "error_cause")).toEqual(Option.some("NodeDisconnected"))
    }).pipe(Effect.orDie)
  )
})
