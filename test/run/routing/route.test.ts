import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { makeAffinityIndex } from "../../../src/run/routing/affinityIndex.js"
import { HEALTHY, type Health, isEjected, observe } from "../../../src/run/routing/health.js"
import { prefixBlocks } from "../../../src/run/routing/prefix.js"
import { type Candidate, DEFAULT_LOAD_BOUND, overBound, route, type RouteInput } from "../../../src/run/routing/route.js"
import type { ChatMessage, SubmitRunRequest } from "../../../src/protocol/SubmitRunRequest.js"

/** A pool of 2–6 nodes, each with its runs in flight; unbounded unless a test bounds them. */
const pool = fc.array(fc.nat({ max: 12 }), { minLength: 2, maxLength: 6 }).map((loads) =>
  loads.map((inFlight, i): Candidate => ({
    id: `n${i}`,
    inFlight,
    capacity: Number.POSITIVE_INFINITY,
    weight: 1,
    ejected: false
  }))
)

const policies = fc.constantFrom(...(["affinity", "least_busy", "round_robin"] as const))

const least = (cs: ReadonlyArray<Candidate>) => Math.min(...cs.map((c) => c.inFlight))

const affinity = (matched: ReadonlyMap<string, number>, shared = 0): RouteInput => ({
  policy: "affinity",
  turn: 0,
  prompt: () => ({ matched, shared })
})

const session = fc.array(fc.string({ maxLength: 40 }), { minLength: 1, maxLength: 12 })

const requestOf = (turns: ReadonlyArray<string>, system = "you are a coding agent"): SubmitRunRequest => ({
  model: "m",
  messages: [
    { role: "system", content: system },
    ...turns.map((t, i): ChatMessage => ({ role: i % 2 === 0 ? "user" : "assistant", content: t }))
  ],
  tools: [{ type: "function", function: { name: "read_file", parameters: { type: "object" } } }],
  sampling: {},
  metadata: {}
})

describe("routing decisions (pure)", () => {
  it.prop(
    "same prefix, same node: the node that was sent a prompt's prefix gets its continuation while under the load bound",
    [pool, fc.nat(), session, session],
    ([candidates, pick, history, next]) => {
      const holder = candidates[pick % candidates.length]!
      // The holder's load anywhere under the bound relative to the least busy of the others.
      const others = candidates.filter((c) => c !== holder)
      const low = least(others)
      const within = { ...holder, inFlight: Math.min(holder.inFlight, low + Math.max(2, 0.5 * low)) }
      const nodes = candidates.map((c) => (c === holder ? within : c))
      const index = makeAffinityIndex()
      const before = prefixBlocks(requestOf(history))
      index.record(before, holder.id)
      const after = prefixBlocks(requestOf([...history, ...next]))
      const choice = route(nodes, affinity(index.matches(after, nodes.length), 2))
      expect(choice?.node.id).toBe(holder.id)
      expect(choice?.reason).toBe("affinity")
      expect(choice?.matchedBlocks).toBe(before.length)
    }
  )

  it.prop(
    "the bound spills: a node over it is passed over for the least busy, and the decision says so",
    [pool, fc.nat(), fc.integer({ min: 1, max: 40 })],
    ([candidates, pick, depth]) => {
      const holder = candidates[pick % candidates.length]!
      const low = least(candidates.filter((c) => c !== holder))
      const over = { ...holder, inFlight: low + Math.max(2, 0.5 * low) + 1 }
      const nodes = candidates.map((c) => (c === holder ? over : c))
      expect(overBound(over, least(nodes), DEFAULT_LOAD_BOUND)).toBe(true)
      const choice = route(nodes, affinity(new Map([[holder.id, depth]])))
      expect(choice?.node.id).not.toBe(holder.id)
      expect(choice?.reason).toBe("spill")
      expect(choice?.node.inFlight).toBe(low)
    }
  )

  it.prop(
    "an ejected node gets nothing while another can take the run, whatever it holds, whatever the policy",
    [pool, fc.nat(), fc.integer({ min: 0, max: 40 }), policies, fc.nat()],
    ([candidates, pick, depth, policy, turn]) => {
      const ejected = candidates[pick % candidates.length]!
      const nodes = candidates.map((c) => (c === ejected ? { ...c, ejected: true, inFlight: 0 } : c))
      const choice = route(nodes, { policy, turn, prompt: () => ({ matched: new Map([[ejected.id, depth]]), shared: 0 }) })
      expect(choice?.node.id).not.toBe(ejected.id)
    }
  )

  it.prop(
    "a full node is never chosen; no choice only when every node is full; all ejected: still served",
    [pool, fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }), fc.boolean(), policies],
    ([candidates, full, allEjected, policy]) => {
      const nodes = candidates.map((c, i) => ({
        ...c,
        capacity: full[i] === true ? c.inFlight : c.inFlight + 1,
        ejected: allEjected
      }))
      const choice = route(nodes, { policy, turn: 0, prompt: () => ({ matched: new Map(nodes.map((n) => [n.id, 3])), shared: 0 }) })
      if (nodes.every((n) => n.inFlight >= n.capacity)) expect(choice).toBeUndefined()
      else expect(choice !== undefined && choice.node.inFlight < choice.node.capacity).toBe(true)
    }
  )

  it.prop("least_busy takes a node of least load per unit of weight", [pool], ([candidates]) => {
    const choice = route(candidates, { policy: "least_busy", turn: 0, prompt: () => ({ matched: new Map(), shared: 0 }) })
    expect(choice?.node.inFlight).toBe(least(candidates))
    expect(choice?.reason).toBe("least_busy")
  })

  it.prop("round_robin: n turns over n free nodes visit each once", [pool], ([candidates]) => {
    const seen = candidates.map((_, turn) =>
      route(candidates, { policy: "round_robin", turn, prompt: () => ({ matched: new Map(), shared: 0 }) })?.node.id
    )
    expect(new Set(seen).size).toBe(candidates.length)
  })

  it("the prompt is not hashed when one node can take the run", () => {
    let asked = 0
    const nodes: ReadonlyArray<Candidate> = [
      { id: "a", inFlight: 0, capacity: 1, weight: 1, ejected: false },
      { id: "b", inFlight: 1, capacity: 1, weight: 1, ejected: false }
    ]
    const choice = route(nodes, { policy: "affinity", turn: 0, prompt: () => (asked++, { matched: new Map(), shared: 0 }) })
    expect(choice).toMatchObject({ node: { id: "a" }, reason: "only" })
    expect(asked).toBe(0)
  })

  it("equal matches go to the least busy of their holders; none: no_match", () => {
    const nodes: ReadonlyArray<Candidate> = ["a", "b", "c"].map((id, i) => ({
      id,
      inFlight: [2, 1, 0][i]!,
      capacity: Number.POSITIVE_INFINITY,
      weight: 1,
      ejected: false
    }))
    expect(route(nodes, affinity(new Map([["a", 2], ["b", 2]])))).toMatchObject({ node: { id: "b" }, reason: "affinity" })
    expect(route(nodes, affinity(new Map()))).toMatchObject({ node: { id: "c" }, reason: "no_match", matchedBlocks: 0 })
  })

  it.prop(
    "a new conversation (a match no deeper than the shared instructions and tools) goes to the least busy; idle nodes in turn",
    [pool, fc.integer({ min: 1, max: 3 }), fc.array(fc.boolean(), { minLength: 6, maxLength: 6 })],
    ([candidates, shared, holds]) => {
      const matched = new Map(candidates.flatMap((c, i) => (holds[i] === true ? [[c.id, shared] as const] : [])))
      const choice = route(candidates, affinity(matched, shared))
      expect(choice?.node.inFlight).toBe(least(candidates))
      expect(choice?.reason).toBe("no_match")
      const idle = candidates.map((c) => ({ ...c, inFlight: 0 }))
      const turns = idle.map((_, turn) => route(idle, { ...affinity(matched, shared), turn })?.node.id)
      expect(new Set(turns).size).toBe(idle.length)
    }
  )
})

describe("prompt blocks and the affinity index", () => {
  it.prop("blocks are chained: two prompts share exactly their common leading blocks", [session, session, session], ([common, a, b]) => {
    const x = prefixBlocks(requestOf([...common, ...a]))
    const y = prefixBlocks(requestOf([...common, ...b]))
    // system + tools + the common messages, then as far as the two go on alike.
    let same = 0
    const ma = [...common, ...a]
    const mb = [...common, ...b]
    while (same < Math.min(ma.length, mb.length) && ma[same] === mb[same]) same++
    expect(x.slice(0, 2 + same)).toEqual(y.slice(0, 2 + same))
    if (2 + same < Math.min(x.length, y.length)) expect(x[2 + same]).not.toBe(y[2 + same])
  })

  it("not keyed on the first message alone: two sessions opening alike part where they differ", () => {
    const index = makeAffinityIndex()
    index.record(prefixBlocks(requestOf(["fix the bug", "ok", "file A contents"])), "a")
    index.record(prefixBlocks(requestOf(["fix the bug", "ok", "file B contents"])), "b")
    const next = prefixBlocks(requestOf(["fix the bug", "ok", "file B contents", "done", "now test it"]))
    expect(index.matches(next, 2)).toEqual(new Map([["b", 5], ["a", 4]]))
  })

  it("a different system prompt, model or tool list is another prefix", () => {
    const base = prefixBlocks(requestOf(["hi"]))
    expect(prefixBlocks(requestOf(["hi"], "other"))[0]).not.toBe(base[0])
    expect(prefixBlocks({ ...requestOf(["hi"]), model: "n" })[0]).not.toBe(base[0])
    expect(prefixBlocks({ ...requestOf(["hi"]), tools: [] }).length).toBe(base.length - 1)
  })

  it.prop("the index stays within its bound, and the latest prompts are the ones kept", [fc.array(session, { minLength: 1, maxLength: 60 })], ([sessions]) => {
    const index = makeAffinityIndex(32)
    for (const [i, s] of sessions.entries()) index.record(prefixBlocks(requestOf(s, `system ${i}`)), `n${i % 3}`)
    expect(index.size()).toBeLessThanOrEqual(32)
    const last = sessions.length - 1
    const blocks = prefixBlocks(requestOf(sessions[last]!, `system ${last}`))
    if (blocks.length <= 32) expect(index.matches(blocks, 1).get(`n${last % 3}`)).toBe(blocks.length)
  })
})

describe("node health (pure)", () => {
  const unreachableAt = (h: Health, t: number) => observe(h, "unreachable", t).health

  it("unreachable ejects at once; the backoff doubles per ejection until a run goes well; probation re-ejects at once", () => {
    let h = unreachableAt(HEALTHY, 0)
    expect(isEjected(h, 999)).toBe(true)
    expect(isEjected(h, 1000)).toBe(false)
    // On probation: one 5xx ejects again, for twice as long.
    const again = observe(h, "failed", 1000)
    expect(again.ejected).toBe(true)
    h = again.health
    expect(isEjected(h, 2999)).toBe(true)
    expect(isEjected(h, 3000)).toBe(false)
    h = observe(h, "ok", 3000).health
    expect(h).toEqual(HEALTHY)
  })

  it("5xx and timeouts eject after three in a row; a success in between clears the count", () => {
    let h = HEALTHY
    h = observe(h, "failed", 0).health
    h = observe(h, "failed", 1).health
    h = observe(h, "ok", 2).health
    h = observe(h, "failed", 3).health
    h = observe(h, "failed", 4).health
    expect(isEjected(h, 5)).toBe(false)
    const third = observe(h, "failed", 5)
    expect(third.ejected).toBe(true)
    expect(isEjected(third.health, 5)).toBe(true)
  })

  it.prop("failures heard while ejected do not extend the ejection; the backoff never passes 60 s", [fc.array(fc.nat({ max: 120_000 }), { maxLength: 40 })], ([gaps]) => {
    let h = unreachableAt(HEALTHY, 0)
    let t = 0
    for (const gap of gaps) {
      t += gap
      const until = h.ejectedUntil
      const next = observe(h, "unreachable", t)
      if (t < until) expect(next.health.ejectedUntil).toBe(until)
      else expect(next.health.ejectedUntil - t).toBeLessThanOrEqual(60_000)
      h = next.health
    }
  })
})
