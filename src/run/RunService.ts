import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { randomBytes } from "node:crypto"
import { NodeDisconnected, type RunError, StreamClosed, type SubmitError } from "./errors.js"
import { type NodeLease, NodeRegistry } from "./NodeRegistry.js"
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

/** Nodes a run is offered to before a refusal reaches the caller. */
const MAX_NODE_ATTEMPTS = 3

export const newRunId = (): RunId => RunId.make(`run_${randomBytes(12).toString("base64url")}`)

export const make: Effect.Effect<RunService.Service, never, NodeRegistry> = Effect.gen(function* () {
  const registry = yield* NodeRegistry

  const submit = Effect.fn("RunService.submit")(function* (request: SubmitRunRequest) {
    const scope = yield* Effect.scope
    // Each slot in a scope of its own, so that a node that refuses the run gives its slot back at once.
    const leaseIn = (exclude: ReadonlySet<NodeId>) =>
      Effect.gen(function* () {
        const leaseScope = yield* Scope.fork(scope, ExecutionStrategy.sequential)
        const lease = yield* registry.acquire(request.model, exclude).pipe(
          Scope.extend(leaseScope),
          Effect.tapError(() => Scope.close(leaseScope, Exit.void))
        )
        return { lease, leaseScope }
      })
    // The first slot is taken here, so that "no node" and "all busy" stay SubmitErrors.
    const first = yield* leaseIn(new Set())
    const runId = newRunId()
    const dispatch: RunDispatch = { runId, nodeId: first.lease.node.id, model: request.model }
    yield* Effect.annotateCurrentSpan({ runId, nodeId: first.lease.node.id, model: request.model })

    const attempt = (
      lease: NodeLease,
      leaseScope: Scope.CloseableScope,
      tried: ReadonlySet<NodeId>,
      sent: SubmitRunRequest
    ): Stream.Stream<RunEvent, RunError> => {
      const nodeGone = lease.gone.pipe(Effect.zipRight(Effect.fail(new NodeDisconnected({ nodeId: lease.node.id }))))
      return lease.node.start(runId, sent).pipe(
        // A transport that closes without a terminal event is a broken stream, not a success.
        Stream.concat(Stream.fail(new StreamClosed())),
        Stream.takeUntil(isTerminal),
        Stream.interruptWhen(nodeGone),
        // The node ran nothing (refused, or no answer): free its slot and try another node, a bounded number of times.
        Stream.catchTag("NodeUnavailable", (e) => {
          const excluded = new Set(tried).add(lease.node.id)
          if (excluded.size >= MAX_NODE_ATTEMPTS) return Stream.fail(e)
          return Stream.unwrap(
            Effect.logDebug("node unavailable; trying another").pipe(
              Effect.annotateLogs({ runId, nodeId: lease.node.id, reason: e.reason }),
              Effect.zipRight(Scope.close(leaseScope, Exit.void)),
              Effect.zipRight(leaseIn(excluded)),
              Effect.match({
                onFailure: () => Stream.fail(e),
                // The next node is told which attempt this is and which node refused it.
                onSuccess: (next) =>
                  attempt(next.lease, next.leaseScope, excluded, {
                    ...sent,
                    metadata: {
                      ...sent.metadata,
                      node_attempt: String(excluded.size + 1),
                      failed_node_id: lease.node.id,
                      node_failure: e.reason
                    }
                  })
              })
            )
          )
        })
      )
    }
    return { dispatch, events: attempt(first.lease, first.leaseScope, new Set(), request) } satisfies RunHandle
  })

  return { submit }
})

export const RunServiceLive: Layer.Layer<RunService, never, NodeRegistry> = Layer.effect(RunService, make)
