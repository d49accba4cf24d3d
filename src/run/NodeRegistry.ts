import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import * as StreamM from "effect/Stream"
import { NodesAtCapacity, NoNodeForModel, type RunError, type SubmitError } from "./errors.js"
import type { NodeId, RunEvent, RunId } from "./RunEvent.js"
import type { SubmitRunRequest } from "./SubmitRunRequest.js"

/**
 * A node as the edge reaches it through some transport. `start` begins a run;
 * interrupting or finishing the returned stream's consumer cancels it on the node.
 */
export interface NodeConnection {
  readonly id: NodeId
  readonly models: ReadonlyArray<string>
  readonly maxConcurrentRuns: number
  /** May fail with NodeUnavailable, and only before its first event (the run did not start). */
  readonly start: (runId: RunId, request: SubmitRunRequest) => Stream.Stream<RunEvent, RunError>
}

export interface NodeStatus {
  readonly id: NodeId
  readonly models: ReadonlyArray<string>
  readonly maxConcurrentRuns: number
  readonly inFlight: number
}

export type NodeEvent =
  | { readonly _tag: "NodeJoined"; readonly node: NodeStatus }
  | { readonly _tag: "NodeLeft"; readonly nodeId: NodeId }

/** A slot on a node, held for the life of a run. */
export interface NodeLease {
  readonly node: NodeConnection
  /** Completes when the node leaves the registry (disconnects). */
  readonly gone: Effect.Effect<void>
}

interface Entry {
  readonly node: NodeConnection
  readonly inFlight: number
  readonly gone: Deferred.Deferred<void>
}

export declare namespace NodeRegistry {
  export interface Service {
    /** Adds a node until the scope closes; its runs fail with `node disconnected` when it leaves. */
    readonly register: (node: NodeConnection) => Effect.Effect<void, never, Scope.Scope>
    /** Takes a slot on the least-busy live node serving `model` (not in `exclude`), released when the scope closes. */
    readonly acquire: (
      model: string,
      exclude?: ReadonlySet<NodeId>
    ) => Effect.Effect<NodeLease, SubmitError, Scope.Scope>
    readonly nodes: Effect.Effect<ReadonlyArray<NodeStatus>>
    /** Node joined/left events from now on (subscribed when this runs, until the scope closes). */
    readonly subscribe: Effect.Effect<Stream.Stream<NodeEvent>, never, Scope.Scope>
  }
}

export class NodeRegistry extends Context.Tag("@iop/edge/NodeRegistry")<NodeRegistry, NodeRegistry.Service>() {}

const status = (e: Entry): NodeStatus => ({
  id: e.node.id,
  models: e.node.models,
  maxConcurrentRuns: e.node.maxConcurrentRuns,
  inFlight: e.inFlight
})

/** Least busy by load ratio, then by in-flight count; nodes at capacity are skipped. */
export const selectNode = (
  entries: Iterable<Entry>,
  model: string,
  exclude?: ReadonlySet<NodeId>
): Entry | "none" | "full" => {
  let best: Entry | undefined
  let serves = false
  for (const e of entries) {
    if (!e.node.models.includes(model) || exclude?.has(e.node.id) === true) continue
    serves = true
    if (e.inFlight >= e.node.maxConcurrentRuns) continue
    if (best === undefined || load(e) < load(best) || (load(e) === load(best) && e.inFlight < best.inFlight)) best = e
  }
  return best ?? (serves ? "full" : "none")
}

const load = (e: Entry): number =>
  Number.isFinite(e.node.maxConcurrentRuns) ? e.inFlight / e.node.maxConcurrentRuns : e.inFlight

export const make: Effect.Effect<NodeRegistry.Service> = Effect.gen(function* () {
  const entries = yield* Ref.make(new Map<NodeId, Entry>())
  const hub = yield* PubSub.unbounded<NodeEvent>()

  const update = (id: NodeId, f: (e: Entry) => Entry) =>
    Ref.update(entries, (m) => {
      const e = m.get(id)
      return e === undefined ? m : new Map(m).set(id, f(e))
    })

  const register = (node: NodeConnection) =>
    Effect.acquireRelease(
      Effect.gen(function* () {
        const gone = yield* Deferred.make<void>()
        const entry: Entry = { node, inFlight: 0, gone }
        yield* Ref.update(entries, (m) => new Map(m).set(node.id, entry))
        yield* PubSub.publish(hub, { _tag: "NodeJoined", node: status(entry) })
        return gone
      }),
      (gone) =>
        Ref.update(entries, (m) => {
          const next = new Map(m)
          next.delete(node.id)
          return next
        }).pipe(
          Effect.zipRight(Deferred.succeed(gone, undefined)),
          Effect.zipRight(PubSub.publish(hub, { _tag: "NodeLeft", nodeId: node.id }))
        )
    ).pipe(Effect.asVoid)

  const acquire = (model: string, exclude?: ReadonlySet<NodeId>) =>
    Effect.acquireRelease(
      Ref.modify(entries, (m): readonly [Entry | "none" | "full", Map<NodeId, Entry>] => {
        const chosen = selectNode(m.values(), model, exclude)
        if (typeof chosen === "string") return [chosen, m]
        return [chosen, new Map(m).set(chosen.node.id, { ...chosen, inFlight: chosen.inFlight + 1 })]
      }).pipe(
        Effect.flatMap((chosen): Effect.Effect<Entry, SubmitError> =>
          chosen === "none"
            ? Effect.fail(new NoNodeForModel({ model }))
            : chosen === "full"
            ? Effect.fail(new NodesAtCapacity({ model }))
            : Effect.succeed(chosen)
        )
      ),
      (entry) => update(entry.node.id, (e) => ({ ...e, inFlight: Math.max(0, e.inFlight - 1) }))
    ).pipe(Effect.map((entry): NodeLease => ({ node: entry.node, gone: Deferred.await(entry.gone) })))

  return {
    register,
    acquire,
    nodes: Ref.get(entries).pipe(Effect.map((m) => Array.from(m.values(), status))),
    subscribe: PubSub.subscribe(hub).pipe(Effect.map((queue) => StreamM.fromQueue(queue)))
  }
})

export const NodeRegistryLive: Layer.Layer<NodeRegistry> = Layer.effect(NodeRegistry, make)
