import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { NodesAtCapacity, NoNodeForModel, type NodeUnavailable, type RunRequestTooLarge, type SubmitError } from "../protocol/errors.js"
import type { NodeId, RunId } from "../protocol/RunEvent.js"
import type { RunSink } from "../protocol/RunSink.js"
import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"
import { onCloseSync } from "../common/onClose.js"
import { findModel as findByName, type ModelOptions } from "../protocol/ModelOptions.js"

/** A node as the edge reaches it through some transport. */
export interface NodeConnection {
  readonly id: NodeId
  /** The models it serves, with the options the chat plane applies to them (parsers, reasoning, output). */
  readonly models: ReadonlyArray<ModelOptions>
  readonly maxConcurrentRuns: number
  /**
   * Starts a run whose events go into `sink`; succeeds once the node took
   * it. Fails with NodeUnavailable when the node refused it or did not
   * answer (nothing ran). Closing the scope cancels the run on the node.
   */
  readonly start: (
    runId: RunId,
    request: SubmitRunRequest,
    sink: RunSink
  ) => Effect.Effect<void, NodeUnavailable | RunRequestTooLarge, Scope.Scope>
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

/** A slot on a node, held until the scope it was acquired in closes. */
export interface NodeLease {
  readonly node: NodeConnection
  /**
   * Calls `f` (once) if the node leaves while the lease is held; registered
   * until the lease's scope closes. A callback, so that watching for node
   * loss costs nothing per event.
   */
  readonly onGone: (f: () => void) => void
}

/** One registered node. Mutable, owned by the registry: every change is synchronous. */
interface Entry {
  /** Replaced by `update` when the node's models change (its slots and watchers stay). */
  node: NodeConnection
  ids: ReadonlySet<string>
  inFlight: number
  readonly watchers: Set<() => void>
}

export declare namespace NodeRegistry {
  export interface Service {
    /** Adds a node until the scope closes; its runs fail with `node disconnected` when it leaves. */
    readonly register: (node: NodeConnection) => Effect.Effect<void, never, Scope.Scope>
    /**
     * A registered node's models changed (a node re-read its upstream's chat template): the catalogue follows,
     * its runs and slots are untouched. A node not registered is ignored.
     */
    readonly update: (node: NodeConnection) => Effect.Effect<void>
    /** Takes a slot on the least-busy live node serving `model` (not in `exclude`), released when the scope closes. */
    readonly acquire: (
      model: string,
      exclude?: ReadonlySet<NodeId>
    ) => Effect.Effect<NodeLease, SubmitError, Scope.Scope>
    readonly nodes: Effect.Effect<ReadonlyArray<NodeStatus>>
    /**
     * The model a caller's name (an id or an alias) names, as a live node serves it: the catalogue is the
     * registered nodes, not a config file.
     */
    readonly findModel: (name: string) => ModelOptions | undefined
    /** Every model some live node serves, once each (the first node's options). */
    readonly models: () => ReadonlyArray<ModelOptions>
    /**
     * Whether some node served `name` (an id or alias) since the registry started (bounded memory): a known
     * model with no live node is an outage (503), not an unknown model (404).
     */
    readonly wasServed: (name: string) => boolean
    /** Node joined/left events from now on (subscribed when this runs, until the scope closes). */
    readonly subscribe: Effect.Effect<Stream.Stream<NodeEvent>, never, Scope.Scope>
  }
}

export class NodeRegistry extends Context.Tag("@iop/edge/NodeRegistry")<NodeRegistry, NodeRegistry.Service>() {}

const status = (e: Entry): NodeStatus => ({
  id: e.node.id,
  models: Array.from(e.ids),
  maxConcurrentRuns: e.node.maxConcurrentRuns,
  inFlight: e.inFlight
})

const load = (e: { readonly node: NodeConnection; readonly inFlight: number }): number =>
  Number.isFinite(e.node.maxConcurrentRuns) ? e.inFlight / e.node.maxConcurrentRuns : e.inFlight

/** Least busy by load ratio, then by in-flight count; nodes at capacity are skipped. */
export const selectNode = <E extends { readonly node: NodeConnection; readonly ids: ReadonlySet<string>; readonly inFlight: number }>(
  entries: Iterable<E>,
  model: string,
  exclude?: ReadonlySet<NodeId>
): E | "none" | "full" => {
  let best: E | undefined
  let serves = false
  for (const e of entries) {
    if (!e.ids.has(model) || exclude?.has(e.node.id) === true) continue
    serves = true
    if (e.inFlight >= e.node.maxConcurrentRuns) continue
    if (best === undefined || load(e) < load(best) || (load(e) === load(best) && e.inFlight < best.inFlight)) best = e
  }
  return best ?? (serves ? "full" : "none")
}

const MAX_REMEMBERED_NAMES = 4096

export const make: Effect.Effect<NodeRegistry.Service> = Effect.gen(function* () {
  // Plain mutable state: every read and write below is one synchronous step, so no Ref is needed.
  const entries = new Map<NodeId, Entry>()
  const hub = yield* PubSub.unbounded<NodeEvent>()
  // Names ever served, oldest first; bounded so that a flood of remote announcements cannot grow it forever.
  const everServed = new Set<string>()
  const remember = (models: ReadonlyArray<ModelOptions>) => {
    for (const m of models) {
      for (const name of [m.id, ...m.aliases]) {
        everServed.delete(name)
        everServed.add(name)
      }
    }
    for (const name of everServed) {
      if (everServed.size <= MAX_REMEMBERED_NAMES) break
      everServed.delete(name)
    }
  }

  const register = (node: NodeConnection) =>
    Effect.acquireRelease(
      Effect.suspend(() => {
        const entry: Entry = { node, ids: new Set(node.models.map((m) => m.id)), inFlight: 0, watchers: new Set() }
        entries.set(node.id, entry)
        remember(node.models)
        return PubSub.publish(hub, { _tag: "NodeJoined", node: status(entry) }).pipe(Effect.as(entry))
      }),
      (entry) =>
        Effect.suspend(() => {
          if (entries.get(node.id) === entry) entries.delete(node.id)
          const watchers = Array.from(entry.watchers)
          entry.watchers.clear()
          for (const f of watchers) f()
          return PubSub.publish(hub, { _tag: "NodeLeft", nodeId: node.id })
        })
    ).pipe(Effect.asVoid)

  const acquire = (model: string, exclude?: ReadonlySet<NodeId>) =>
    Effect.suspend((): Effect.Effect<Entry, SubmitError> => {
      const chosen = selectNode(entries.values(), model, exclude)
      if (chosen === "none") return Effect.fail(new NoNodeForModel({ model }))
      if (chosen === "full") return Effect.fail(new NodesAtCapacity({ model }))
      chosen.inFlight += 1
      return Effect.succeed(chosen)
    }).pipe(
      Effect.flatMap((entry) => {
        const mine: Array<() => void> = []
        // One finalizer gives the slot back and drops the lease's node-loss watchers.
        return Effect.as(
          onCloseSync(() => {
            entry.inFlight = Math.max(0, entry.inFlight - 1)
            for (const f of mine) entry.watchers.delete(f)
          }),
          {
            node: entry.node,
            onGone: (f: () => void) => {
              // A node that already left fails its new watcher at once.
              if (entries.get(entry.node.id) !== entry) return f()
              mine.push(f)
              entry.watchers.add(f)
            }
          } satisfies NodeLease
        )
      })
    )

  const update = (node: NodeConnection) =>
    Effect.sync(() => {
      const entry = entries.get(node.id)
      if (entry === undefined) return
      entry.node = node
      entry.ids = new Set(node.models.map((m) => m.id))
      remember(node.models)
    })

  return {
    register,
    update,
    acquire,
    nodes: Effect.sync(() => Array.from(entries.values(), status)),
    findModel: (name) => {
      for (const e of entries.values()) {
        const model = findByName(e.node.models, name)
        if (model !== undefined) return model
      }
      return undefined
    },
    models: () => {
      const byId = new Map<string, ModelOptions>()
      for (const e of entries.values()) for (const m of e.node.models) if (!byId.has(m.id)) byId.set(m.id, m)
      return Array.from(byId.values())
    },
    wasServed: (name) => everServed.has(name),
    subscribe: PubSub.subscribe(hub).pipe(Effect.map((queue) => Stream.fromQueue(queue)))
  }
})

export const layer: Layer.Layer<NodeRegistry> = Layer.effect(NodeRegistry, make)
