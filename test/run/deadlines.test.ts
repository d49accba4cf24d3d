import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { boundsFor, deadlinesOf, dueAt, expiry, type RunProgress } from "../../src/run/deadlines.js"

const idle = { idleMs: 60_000, wholeMs: 600_000 }
const bound = fc.option(fc.integer({ min: 1, max: 1_000_000 }), { nil: undefined })
const progress: fc.Arbitrary<RunProgress> = fc.record({
  lastProgressAt: fc.integer({ min: 0, max: 1_000_000 }),
  wholeSince: fc.option(fc.integer({ min: 0, max: 1_000_000 }), { nil: undefined }),
  answering: fc.boolean(),
  ended: fc.boolean(),
  readerWaiting: fc.boolean()
})

describe("boundsFor", () => {
  it("a model's number replaces the edge's bound, its null removes it, its absence keeps it", () => {
    const edge = { firstTokenMs: 10_000, maxRunMs: 600_000 }
    expect(boundsFor(edge, undefined)).toBe(edge)
    expect(boundsFor(edge, {})).toEqual(edge)
    expect(boundsFor(edge, { firstTokenTimeoutMs: 3_000 })).toEqual({ firstTokenMs: 3_000, maxRunMs: 600_000 })
    expect(boundsFor(edge, { firstTokenTimeoutMs: null, maxRunMs: null })).toEqual({ firstTokenMs: undefined, maxRunMs: undefined })
    expect(boundsFor({ firstTokenMs: undefined, maxRunMs: undefined }, { maxRunMs: 5 })).toEqual({ firstTokenMs: undefined, maxRunMs: 5 })
  })
})

describe("dueAt and expiry", () => {
  it.prop("when a run is due, expiry names the bound that is due then, and its ms", [progress, bound, bound, fc.boolean(), fc.nat(1_000_000)], ([run, firstTokenMs, maxRunMs, whole, startedAt]) => {
    const own = deadlinesOf(startedAt, { firstTokenMs, maxRunMs }, whole)
    const due = dueAt(run, idle, own)
    const error = expiry(run, idle, own)
    switch (error._tag) {
      case "RunDeadline":
        expect(run.ended).toBe(false)
        if (error.bound === "max_run") expect([own.maxRunAt, error.ms]).toEqual([due, maxRunMs])
        else expect([own.firstTokenAt, error.ms, run.answering, whole]).toEqual([due, firstTokenMs, false, false])
        break
      case "RunIdle":
        expect(due).toBe(run.wholeSince === undefined ? run.lastProgressAt + idle.idleMs : run.wholeSince + idle.wholeMs)
        break
      case "WriteStalled":
        expect([due, run.wholeSince]).toEqual([run.lastProgressAt + idle.idleMs, undefined])
        expect(run.readerWaiting && !run.ended).toBe(false)
        break
      default:
        expect.unreachable(error._tag)
    }
  })

  it("the first-token bound holds until the answer began, the run bound until its events ended; idle always", () => {
    const own = deadlinesOf(1_000, { firstTokenMs: 5_000, maxRunMs: 30_000 }, false)
    const run = { lastProgressAt: 1_000, wholeSince: undefined, answering: false, ended: false, readerWaiting: true }
    expect(dueAt(run, idle, own)).toBe(6_000)
    expect(dueAt({ ...run, answering: true }, idle, own)).toBe(31_000)
    expect(dueAt({ ...run, answering: true, ended: true }, idle, own)).toBe(61_000)
    expect(dueAt(run, idle, deadlinesOf(1_000, { firstTokenMs: 5_000, maxRunMs: undefined }, true))).toBe(61_000)
  })
})
