import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { modelOptions } from "../../src/config/EdgeConfig.js"
import { fromStream } from "../../src/providers/Provider.js"
import type { NodeConnection } from "../../src/run/NodeRegistry.js"
import { NodeId, type RunEvent } from "../../src/protocol/RunEvent.js"
import type { SubmitRunRequest } from "../../src/protocol/SubmitRunRequest.js"

/**
 * A node whose runs play `script` (each chunk one batch) into the run's sink,
 * recording the runs started, the requests they got, and the runs stopped
 * before their script ended (cancelled on the node).
 */
export const scriptedNode = (
  id: string,
  models: ReadonlyArray<string>,
  script: Stream.Stream<RunEvent> = Stream.never,
  maxConcurrentRuns = Number.POSITIVE_INFINITY
) => {
  const started: Array<string> = []
  const stopped: Array<string> = []
  const requests: Array<SubmitRunRequest> = []
  const connection: NodeConnection = {
    id: NodeId.make(id),
    models: models.map((m) => modelOptions(m)),
    maxConcurrentRuns,
    start: (runId, request, sink) =>
      Effect.gen(function* () {
        started.push(runId)
        requests.push(request)
        let finished = false
        yield* Effect.addFinalizer(() => Effect.sync(() => (finished ? undefined : stopped.push(runId))))
        yield* fromStream(() => script.pipe(Stream.onEnd(Effect.sync(() => (finished = true))))).start(request, sink)
      })
  }
  return { connection, started, stopped, requests }
}
