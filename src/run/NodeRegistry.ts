import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { NodesAtCapacity, NoNodeForModel, type NodeUnavailable, type RunRequestTooLarge, type SubmitError } from "../protocol/errors.js"
import type { NodeId, RunId } from "../protocol/RunEvent.js"
import type { RunSink } from "../protocol/RunSink.js"
import type { SubmitRunRequest } from "../protocol/SubmitRunRequest.js"
import { onCloseSync } from "../common/onClose.js"
import { findModel as findByName, type ModelOptions, type RoutingPolicy } from "../protocol/ModelOptions.js"
import { type AffinityIndex, makeAffinityIndex } from "./routing/affinityIndex.js"
import { HEALTHY, type Health, isEjected, observe, recover, type RunHealth } from "./routing/health.js"
import type { PromptBlocks } from "./routing/prefix.js"
import { type Candidate, type RouteReason, route } from "./routing/route.js"

// The routing types the registry's signatures name.
export type { PrefixBlocks, PromptBlocks } from "./routing/prefix.js"
export type { RouteReason } from "./routing/route.js"
export type { RunHealth } from "./routing/health.js"

/** A node as the edge reaches it through some transport. */
export interface NodeConnection {
  readonly id: NodeId
  /** The models it serves, with the options the chat plane applies to them (parsers, reasoning, output). */
  readonly models: ReadonlyArray<ModelOptions>
  readonly maxConcurrentRuns: number
  /**
   * Its share of the load when its runs are not bounded (`maxConcurrentRuns` infinite): runs in flight per unit of
   * weight are compared (default 1). A bounded node's weight is its slots.
   */
  readonly weight?: number
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
  /** Ejected by its health (its upstream unreachable, failing): it gets no run while another node can take it. */
  readonly ejected: boolean
}

export type NodeEvent =
  | { readonly _tag: "NodeJoined"; readonly node: NodeStatus }
  | { readonly _tag: "NodeLeft"; readonly nodeId: NodeId }

/** Why a run went to its node (the run's summary line says it). */
export interface RouteDecision {
  readonly reason: RouteReason
  /** Leading prompt blocks the node was sent before (`prefix.ts`); 0 when the policy does not look. */
  readonly matchedBlocks: number
  /** Other nodes that could have taken it (a run that fails on this one before anything was written may go there). */
  readonly alternatives: number
}

/** A slot on a node, held until the scope it was acquired in closes. */
export interface NodeLease {
  readonly node: NodeConnection
  /**
   * Calls `f` (once) if the node leaves while the lease is held; registered
   * until the lease's scope closes. A callback, so that watching for node
   * loss costs nothing per event.
   */
  readonly onGone: (f: () => void) => void
  readonly route: RouteDecision
  /** How the run went on the node, for its health (passive ejection); at most once, before the scope closes. */
  readonly report: (health: RunHealth) => void
}

/** What a run asks of the registry beside its model. */
export interface AcquireOptions {
  /** Nodes not to offer it to (they refused it, or it failed there). */
  readonly exclude?: ReadonlySet<NodeId>
  /** Its prompt's block hashes (`prefix.ts`), asked for only when the model's policy is affinity and there is a choice. */
  readonly prefix?: () => PromptBlocks
}

/** One registered node. Mutable, owned by the registry: every change is synchronous. */
interface Entry {
  /** Replaced by `update` when the node's models change (its slots and watchers stay). */
  node: NodeConnection
  ids: ReadonlySet<string>
  inFlight: number
  readonly watchers: Set<() => void>
  health: Health
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
    /**
     * Takes a slot on a live node serving `model` (not excluded), as the model's routing policy chooses
     * (`routing/route.ts`: affinity, least busy or round robin, ejected nodes last), released when the scope closes.
     */
    readonly acquire: (
      model: string,
      options?: AcquireOptions
    ) => Effect.Effect<NodeLease, SubmitError, Scope.Scope>
    /**
     * An active health check's answer for a node: `false` ejects it (as an unreachable upstream does); `true` ends
     * its ejection (it is on probation: its next failure ejects it again).
     */
    readonly checked: (nodeId: NodeId, healthy: boolean) => Effect.Effect<void>
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

const statusAt = (e: Entry, now: number): NodeStatus => ({
  id: e.node.id,
  models: Array.from(e.ids),
  maxConcurrentRuns: e.node.maxConcurrentRuns,
  inFlight: e.inFlight,
  ejected: isEjected(e.health, now)
})

/** A registered node as the routing functions see it. */
interface Offer extends Candidate {
  readonly entry: Entry
}

const offerOf = (e: Entry, now: number): Offer => {
  const capacity = e.node.maxConcurrentRuns
  return {
    id: e.node.id,
    inFlight: e.inFlight,
    capacity,
    weight: Number.isFinite(capacity) ? capacity : e.node.weight ?? 1,
    ejected: isEjected(e.health, now),
    entry: e
  }
}

const NO_PROMPT: PromptBlocks = { blocks: [], shared: 0 }

/** The model's policy, as the first node that says one serves it; affinity by default. */
const policyOf = (offers: ReadonlyArray<Offer>, model: string): RoutingPolicy => {
  for (const o of offers) {
    const policy = o.entry.node.models.find((m) => m.id === model)?.routing
    if (policy !== undefined) return policy
  }
  return "affinity"
}

const MAX_REMEMBERED_NAMES = 4096

export const make: Effect.Effect<NodeRegistry.Service> = Effect.gen(function* () {
  // Plain mutable state: every read and write below is one synchronous step, so no Ref is needed.
  const entries = new Map<NodeId, Entry>()
  const clock = yield* Effect.clock
  const now = () => clock.unsafeCurrentTimeMillis()
  const index: AffinityIndex = makeAffinityIndex()
  // Each model's turn: round robin's, and affinity's among equally idle nodes.
  const turns = new Map<string, number>()
  // Health changes are logged from wherever they are heard (a run's finalizer, a check's fiber).
  const runFork = Runtime.runFork(yield* Effect.runtime<never>())
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
        const entry: Entry = {
          node,
          ids: new Set(node.models.map((m) => m.id)),
          inFlight: 0,
          watchers: new Set(),
          health: HEALTHY
        }
        entries.set(node.id, entry)
        remember(node.models)
        return PubSub.publish(hub, { _tag: "NodeJoined", node: statusAt(entry, now()) }).pipe(Effect.as(entry))
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

  /** The node's health after `outcome` (a run's, or a check's); an ejection or a recovery is logged. */
  const judge = (entry: Entry, outcome: RunHealth | "checked"): void => {
    const at = now()
    const was = isEjected(entry.health, at)
    const next = outcome === "checked"
      ? { health: recover(entry.health, at), ejected: false }
      : observe(entry.health, outcome, at)
    entry.health = next.health
    if (next.ejected) {
      runFork(Effect.logWarning("node ejected").pipe(Effect.annotateLogs({
        nodeId: entry.node.id,
        cause: outcome,
        for_ms: next.health.ejectedUntil - at
      })))
    } else if (was && !isEjected(next.health, at)) {
      runFork(Effect.logInfo("node recovered").pipe(Effect.annotateLogs({ nodeId: entry.node.id })))
    }
  }

  /** The node that takes the run and why, or why none can; affinity records the prompt's blocks under its choice. */
  const choose = (model: string, options: AcquireOptions | undefined) => {
    const exclude = options?.exclude
    const offers: Array<Offer> = []
    const at = now()
    for (const e of entries.values()) {
      if (!e.ids.has(model) || exclude?.has(e.node.id) === true) continue
      offers.push(offerOf(e, at))
    }
    if (offers.length === 0) return new NoNodeForModel({ model })
    const policy = policyOf(offers, model)
    const turn = turns.get(model) ?? 0
    // Hashed once per acquire, only when there is a choice now or there may be one at the next run.
    let prompt: PromptBlocks | undefined
    const blocks = () => (prompt ??= options?.prefix?.() ?? NO_PROMPT)
    const choice = route(offers, {
      policy,
      turn,
      prompt: () => ({ matched: index.matches(blocks().blocks, offers.length), shared: blocks().shared })
    })
    if (choice === undefined) return new NodesAtCapacity({ model })
    turns.set(model, turn + 1)
    if (policy === "affinity" && offers.length > 1) index.record(blocks().blocks, choice.node.id)
    return {
      entry: choice.node.entry,
      route: { reason: choice.reason, matchedBlocks: choice.matchedBlocks, alternatives: offers.length - 1 }
    }
  }

  const acquire = (model: string, options?: AcquireOptions) =>
    Effect.suspend((): Effect.Effect<{ readonly entry: Entry; readonly route: RouteDecision }, SubmitError> => {
      const chosen = choose(model, options)
      if (chosen instanceof NoNodeForModel || chosen instanceof NodesAtCapacity) return Effect.fail(chosen)
      chosen.entry.inFlight += 1
      return Effect.succeed(chosen)
    }).pipe(
      Effect.flatMap(({ entry, route }) => {
        const mine: Array<() => void> = []
        let reported = false
        let released = false
        // One finalizer gives the slot back and drops the lease's node-loss watchers.
        return Effect.as(
          onCloseSync(() => {
            released = true
            entry.inFlight = Math.max(0, entry.inFlight - 1)
            for (const f of mine) entry.watchers.delete(f)
          }),
          {
            node: entry.node,
            onGone: (f: () => void) => {
              // A lease given back watches nothing; a node that already left fails its new watcher at once.
              if (released) return
              if (entries.get(entry.node.id) !== entry) return f()
              mine.push(f)
              entry.watchers.add(f)
            },
            route,
            report: (health: RunHealth) => {
              if (reported) return
              reported = true
              judge(entry, health)
            }
          } satisfies NodeLease
        )
      })
    )

  const checked = (nodeId: NodeId, healthy: boolean) =>
    Effect.sync(() => {
      const entry = entries.get(nodeId)
      if (entry !== undefined) judge(entry, healthy ? "checked" : "unreachable")
    })

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
    checked,
    nodes: Effect.sync(() => {
      const at = now()
      return Array.from(entries.values(), (e) => statusAt(e, at))
    }),
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
