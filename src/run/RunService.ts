import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { randomBytes } from "node:crypto"
import { NodeDisconnected, type RunError, StreamClosed, type SubmitError } from "./errors.js"
import { NodeRegistry } from "./NodeRegistry.js"
import { isTerminal, type NodeId, type RunEvent, RunId } from "./RunEvent.js"
import type { SubmitRunRequest } from "./SubmitRunRequest.js"

export interface RunDispatch {
  readonly runId: RunId
  readonly nodeId: NodeId
  readonly model: string
}

/**
 * A submitted run. `events` ends with exactly one terminal event (Complete,
 * Failed or Cancelled) or fails with a RunError. Closing the scope `submit`
 * ran in cancels the run on its node if it has not finished.
 */
export interface RunHandle {
  readonly dispatch: RunDispatch
  readonly events: Stream.Stream<RunEvent, RunError>
}

export declare namespace RunService {
  export interface Service {
    readonly submit: (request: SubmitRunRequest) => Effect.Effect<RunHandle, SubmitError, Scope.Scope>
  }
}

export class RunService extends Context.Tag("@iop/edge/RunService")<RunService, RunService.Service>() {}

export const newRunId = (): RunId => RunId.make(`run_${randomBytes(12).toString("base64url")}`)

export const make: Effect.Effect<RunService.Service, never, NodeRegistry> = Effect.gen(function* () {
  const registry = yield* NodeRegistry

  const submit = Effect.fn("RunService.submit")(function* (request: SubmitRunRequest) {
    const lease = yield* registry.acquire(request.model)
    const runId = newRunId()
    const dispatch: RunDispatch = { runId, nodeId: lease.node.id, model: request.model }
    yield* Effect.annotateCurrentSpan({ runId, nodeId: lease.node.id, model: request.model })
    const nodeGone = lease.gone.pipe(Effect.zipRight(Effect.fail(new NodeDisconnected({ nodeId: lease.node.id }))))
    const events = lease.node.start(runId, request).pipe(
      // A transport that closes without a terminal event is a broken stream, not a success.
      Stream.concat(Stream.fail(new StreamClosed())),
      Stream.takeUntil(isTerminal),
      Stream.interruptWhen(nodeGone)
    )
    return { dispatch, events } satisfies RunHandle
  })

  return { submit }
})

export const RunServiceLive: Layer.Layer<RunService, never, NodeRegistry> = Layer.effect(RunService, make)
