import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type { NodeUnavailable, SubmitError } from "../protocol/errors.js"
import type { Failed, NodeId, RunEvent, RunId } from "../protocol/RunEvent.js"
import type { RunSink } from "../protocol/RunSink.js"
import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"
import type { NodeLease, NodeRegistry } from "./NodeRegistry.js"
import type { RunChannel } from "./RunChannel.js"
import { healthOf, isNodeFault } from "./routing/health.js"
import { type PromptBlocks, promptBlocks } from "./routing/prefix.js"

/** Nodes a run is offered to before a refusal or a node's failure reaches the caller. */
export const MAX_NODE_ATTEMPTS = 3

export interface AttemptsContext {
  readonly registry: NodeRegistry.Service
  readonly runId: RunId
  readonly channel: RunChannel
  /** The run's scope: each attempt's slot is held in a scope forked from it. */
  readonly runScope: Scope.Scope
  /** Runs `effect` as a fiber of the run's scope (a retry, started from a provider's callback). */
  readonly fork: (effect: Effect.Effect<void>) => void
  /** A node took the run (the first, or the next after a failure): its loss ends the run. */
  readonly onNode: (lease: NodeLease) => void
}

/**
 * A run's way to a node: the registry's choice (its prompt hashed once, when the model's policy asks), then the
 * next node when one refuses (`NodeUnavailable`: its slot given back at once) or fails before it accepted the run
 * (unreachable, a 5xx: `health.isNodeFault`) — nothing was written to the caller either way, and the next node is
 * told which attempt this is and why the last failed (`node_attempt`, `failed_node_id`, `node_failure`). Every
 * node's run ends with a report of its health to the registry (passive ejection).
 */
export class NodeAttempts {
  private readonly excluded = new Set<NodeId>()
  private sent: SubmitRunRequest
  private blocks: PromptBlocks | undefined = undefined
  /** The node that has the run now, and the scope its slot is held in. */
  private current: { readonly lease: NodeLease; readonly scope: Scope.CloseableScope } | undefined = undefined
  /** The last node that took the run (it stays while the run is on its way to the next). */
  private latest: NodeLease | undefined = undefined
  /** A node is being started (its start has not returned). */
  private starting = false
  /** The last node that handed the run back, and the failure it handed back. */
  private handedBack: { readonly lease: NodeLease; readonly failed: Failed } | undefined = undefined

  constructor(private readonly ctx: AttemptsContext, private readonly request: SubmitRunRequest) {
    this.sent = request
  }

  /** The node that has the run (after any failover), or the last one that had it. */
  get lease(): NodeLease | undefined {
    return this.latest
  }

  /** Which node the run is on: 1 for the first, one more for each that refused or failed it. */
  get attempt(): number {
    return this.excluded.size + 1
  }

  private readonly prefix = (): PromptBlocks => (this.blocks ??= promptBlocks(this.request))

  private get attemptsLeft(): boolean {
    return this.excluded.size + 1 < MAX_NODE_ATTEMPTS
  }

  /** The next attempt is told which it is, and which node failed it and how. */
  private moveOn(nodeId: NodeId, reason: string): void {
    this.excluded.add(nodeId)
    this.sent = {
      ...this.sent,
      metadata: {
        ...this.sent.metadata,
        node_attempt: String(this.excluded.size + 1),
        failed_node_id: nodeId,
        node_failure: reason
      }
    }
  }

  /**
   * Takes a slot and starts the run there; a node that refuses gives its slot back at once and the next is tried.
   * After a refusal, "no other node" is still that refusal: every node that could run it said no. A node that
   * failed the run before accepting it while it was being started (a bus node answers at once) is left for the
   * next too; when no other node takes the run, its failure is the run's outcome, on that node.
   */
  readonly start: Effect.Effect<NodeLease, SubmitError> = Effect.gen(this, function* () {
    const { channel, registry, runScope, runId } = this.ctx
    let refused: NodeUnavailable | undefined
    let failedOn: { readonly lease: NodeLease; readonly failed: Failed } | undefined
    for (;;) {
      const scope = yield* Scope.fork(runScope, ExecutionStrategy.sequential)
      this.starting = true
      const started = yield* registry.acquire(this.request.model, { exclude: this.excluded, prefix: this.prefix }).pipe(
        Effect.tap((lease) => {
          this.current = { lease, scope }
          return lease.node.start(runId, this.sent, this.sinkFor(lease))
        }),
        Scope.extend(scope),
        Effect.either
      )
      this.starting = false
      const handed = this.handedBack
      if (started._tag === "Right") {
        if (handed?.lease !== started.right) {
          this.latest = started.right
          return started.right
        }
        // It handed the run back while it was being started.
        yield* Scope.close(scope, Exit.void)
        failedOn = handed
        yield* this.logHandOver(handed.lease.node.id, handed.failed)
        continue
      }
      yield* Scope.close(scope, Exit.void)
      this.current = undefined
      const error: SubmitError = started.left
      if (error._tag === "NodeUnavailable" && this.attemptsLeft) {
        refused = error
        this.moveOn(error.nodeId, error.reason)
        yield* Effect.logDebug("node unavailable; trying another").pipe(
          Effect.annotateLogs({ runId, nodeId: error.nodeId, reason: error.reason })
        )
        continue
      }
      if (failedOn !== undefined) {
        channel.emit([failedOn.failed])
        channel.end()
        this.latest = failedOn.lease
        return failedOn.lease
      }
      return yield* Effect.fail(error._tag === "NodeUnavailable" ? error : refused ?? error)
    }
  })

  private logHandOver(nodeId: NodeId, failed: Failed) {
    return Effect.logWarning("node failed the run before accepting it; trying another").pipe(
      Effect.annotateLogs({ runId: this.ctx.runId, nodeId, reason: failed.message })
    )
  }

  /** The run's last node reports how the run went (from the run's finalizer). */
  readonly settle = (): void => {
    const health = healthOf(this.ctx.channel.terminal, this.ctx.channel.failure)
    if (health !== undefined) this.current?.lease.report(health)
  }

  /** The channel itself when no other node could take the run; else a sink that can hand it on before it is accepted. */
  private sinkFor(lease: NodeLease): RunSink {
    if (lease.route.alternatives === 0 || !this.attemptsLeft) return this.ctx.channel
    return new AttemptSink(this.ctx.channel, (failed) => this.failedBeforeAccept(lease, failed))
  }

  /**
   * `lease`'s node failed the run before accepting it: the run goes to another node, from a fiber of the run's
   * scope, and the failure is held back (`true`); when no other node takes it, the failure is the run's.
   */
  private failedBeforeAccept(lease: NodeLease, failed: Failed): boolean {
    const now = this.current
    if (now === undefined || now.lease !== lease || !this.attemptsLeft || !isNodeFault(failed)) return false
    lease.report(failed.transport !== undefined ? "unreachable" : "failed")
    this.moveOn(lease.node.id, failed.message)
    this.current = undefined
    this.handedBack = { lease, failed }
    // While it is being started, the start moves on by itself.
    if (this.starting) return true
    const { channel } = this.ctx
    this.ctx.fork(
      this.logHandOver(lease.node.id, failed).pipe(
        Effect.zipRight(Scope.close(now.scope, Exit.void)),
        Effect.zipRight(this.start),
        Effect.match({
          onSuccess: this.ctx.onNode,
          // No other node took it: the failure the caller would have had.
          onFailure: () => {
            channel.emit([failed])
            channel.end()
          }
        })
      )
    )
    return true
  }
}

/**
 * One node's sink for a run that another node could take: until the node accepts the run, a first batch that is a
 * node's failure (`isNodeFault`) may be handed back (`handOver` answers whether it was); once accepted, or once
 * anything else arrived, everything goes to the run's channel as it is. A sink that handed its run over drops all
 * that follows (its provider's `end`).
 */
export class AttemptSink implements RunSink {
  private state: "trying" | "passed" | "handedOver" = "trying"

  constructor(private readonly channel: RunChannel, private readonly handOver: (failed: Failed) => boolean) {}

  readonly emit = (events: ReadonlyArray<RunEvent>): boolean => {
    if (this.state === "passed") return this.channel.emit(events)
    if (this.state === "handedOver") return true
    const first = events[0]
    if (first?._tag === "Failed" && this.handOver(first)) {
      this.state = "handedOver"
      return true
    }
    if (first !== undefined) this.state = "passed"
    return this.channel.emit(events)
  }

  readonly accept = (): void => {
    if (this.state === "handedOver") return
    this.state = "passed"
    this.channel.accept()
  }

  readonly awaitWhole = (waiting: boolean): void => {
    if (this.state !== "handedOver") this.channel.awaitWhole(waiting)
  }

  readonly progress = (): void => {
    if (this.state === "handedOver") return
    this.state = "passed"
    this.channel.progress()
  }

  readonly end = (): void => {
    if (this.state !== "handedOver") this.channel.end()
  }

  readonly fail: RunSink["fail"] = (error) => {
    if (this.state !== "handedOver") this.channel.fail(error)
  }

  readonly onReady = (resume: () => void): void => this.channel.onReady(resume)
}
