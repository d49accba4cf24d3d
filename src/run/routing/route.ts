import type { RoutingPolicy } from "../../protocol/ModelOptions.js"

export type { RoutingPolicy }

/**
 * Which node of a model takes a run: plain functions over plain data (the candidates' loads and health, the
 * affinity index's matches), so that every rule is property-tested without a runtime. The registry gathers the
 * candidates and applies the choice.
 */

/**
 * Why a node was chosen, as the run's summary line says it:
 * - `only`: one node could take it (the others full, ejected or excluded);
 * - `affinity`: the node that was sent the longest prefix of this prompt, under the load bound;
 * - `spill`: the node(s) holding the longest prefix were over the load bound: a shorter match, or the least busy;
 * - `no_match`: no node was sent this conversation (at most the instructions and tools every one shares): the least
 *   busy;
 * - `least_busy`, `round_robin`: the model's policy.
 */
export type RouteReason = "only" | "affinity" | "spill" | "no_match" | "least_busy" | "round_robin"

export interface Candidate {
  readonly id: string
  readonly inFlight: number
  /** Runs it takes at once (`Infinity`: no bound). */
  readonly capacity: number
  /** Its share of the load: runs per unit of weight are compared (its slots when bounded, else 1 or its `weight`). */
  readonly weight: number
  /** Ejected by its health (`health.ts`): it gets nothing while another node can take the run. */
  readonly ejected: boolean
}

export interface Choice<C extends Candidate> {
  readonly node: C
  readonly reason: RouteReason
  /** Leading prompt blocks the chosen node was sent before (0 when the policy does not look). */
  readonly matchedBlocks: number
}

/**
 * The affinity load bound: a node holding the prefix is passed over when it has more runs in flight than the least
 * busy candidate plus `max(slack, factor × least)`: on a small pool two more runs, on a large one half again.
 */
export interface LoadBound {
  readonly slack: number
  readonly factor: number
}

export const DEFAULT_LOAD_BOUND: LoadBound = { slack: 2, factor: 0.5 }

const load = (c: Candidate): number => c.inFlight / c.weight

const NO_DEPTH = (): number => 0

/**
 * Least load per unit of weight, then fewest runs, then the deepest match (`depth`); among equals the first from
 * `from` on (a rotating start spreads new conversations over idle nodes).
 */
export const leastBusy = <C extends Candidate>(
  pool: ReadonlyArray<C>,
  depth: (c: C) => number = () => 0,
  from = 0
): C | undefined => {
  let best: C | undefined
  for (let i = 0; i < pool.length; i++) {
    const c = pool[(from + i) % pool.length]!
    if (best === undefined || busier(best, c, depth) > 0) best = c
  }
  return best
}

/** > 0 when `a` is busier than `b` (or as busy with a shallower match). */
const busier = <C extends Candidate>(a: C, b: C, depth: (c: C) => number): number =>
  load(a) - load(b) || a.inFlight - b.inFlight || depth(b) - depth(a)

/**
 * The nodes a run may go to: those with a free slot, and of those the healthy ones — unless every one with a free
 * slot is ejected, when they all are (a pool that failed altogether is still tried rather than refused).
 */
export const poolOf = <C extends Candidate>(candidates: ReadonlyArray<C>): ReadonlyArray<C> => {
  const free = candidates.filter((c) => c.inFlight < c.capacity)
  const healthy = free.filter((c) => !c.ejected)
  return healthy.length > 0 ? healthy : free
}

/** Whether `c` is over the load bound relative to `least` runs in flight. */
export const overBound = (c: Candidate, least: number, bound: LoadBound): boolean =>
  c.inFlight > least + Math.max(bound.slack, bound.factor * least)

/** What the affinity index knows of a prompt: how deep each node's match goes, and how deep a shared one goes. */
export interface PromptMatch {
  /** Node id → the leading blocks of the prompt it was sent. */
  readonly matched: ReadonlyMap<string, number>
  /** Leading blocks every conversation of the agent shares (instructions, tools): `PromptBlocks.shared`. */
  readonly shared: number
}

/**
 * Affinity: among the pool's nodes under the load bound, the one that was sent the longest prefix of this
 * conversation; equal matches go to the least busy. A node over the bound is passed over for a shorter match or,
 * with none, the least busy. A match no deeper than the shared blocks (a new conversation with the agent's usual
 * instructions and tools) is no reason to pile new conversations on one node: it goes to the least busy, equals
 * taken in turn (`turn`), so that conversations spread over idle nodes.
 */
export const byAffinity = <C extends Candidate>(
  pool: ReadonlyArray<C>,
  prompt: PromptMatch,
  bound: LoadBound = DEFAULT_LOAD_BOUND,
  turn = 0
): Choice<C> | undefined => {
  const depth = (c: C) => prompt.matched.get(c.id) ?? 0
  let least = Number.POSITIVE_INFINITY
  let deepest = 0
  for (const c of pool) {
    least = Math.min(least, c.inFlight)
    deepest = Math.max(deepest, depth(c))
  }
  let best: C | undefined
  for (const c of pool) {
    const d = depth(c)
    if (d <= prompt.shared || overBound(c, least, bound)) continue
    if (best === undefined || d > depth(best) || (d === depth(best) && busier(best, c, depth) > 0)) best = c
  }
  if (best !== undefined) {
    return { node: best, reason: depth(best) === deepest ? "affinity" : "spill", matchedBlocks: depth(best) }
  }
  const node = leastBusy(pool, NO_DEPTH, turn % pool.length)
  if (node === undefined) return undefined
  return { node, reason: deepest > prompt.shared ? "spill" : "no_match", matchedBlocks: depth(node) }
}

export interface RouteInput {
  readonly policy: RoutingPolicy
  /** The model's turn (a counter the registry moves on per choice): round robin's, and affinity's among equals. */
  readonly turn: number
  /** The prompt's matches in the affinity index, asked for only when the policy is affinity and there is a choice. */
  readonly prompt: () => PromptMatch
  readonly bound?: LoadBound
}

/** The node that takes the run, and why; undefined when every candidate is full. */
export const route = <C extends Candidate>(candidates: ReadonlyArray<C>, input: RouteInput): Choice<C> | undefined => {
  const pool = poolOf(candidates)
  const [first] = pool
  if (first === undefined) return undefined
  if (pool.length === 1) return { node: first, reason: "only", matchedBlocks: 0 }
  switch (input.policy) {
    case "least_busy":
      return { node: leastBusy(pool) ?? first, reason: "least_busy", matchedBlocks: 0 }
    case "round_robin":
      return { node: pool[input.turn % pool.length] ?? first, reason: "round_robin", matchedBlocks: 0 }
    case "affinity":
      return byAffinity(pool, input.prompt(), input.bound, input.turn)
  }
}
