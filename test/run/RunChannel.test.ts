import { describe, expect, it } from "@effect/vitest"
import { HIGH_WATER_EVENTS, RunChannel } from "../../src/run/RunChannel.js"
import * as RunEvent from "../../src/protocol/RunEvent.js"
import { RunIdle } from "../../src/protocol/errors.js"

const channel = () => new RunChannel(() => 0)
const deltas = (n: number) => Array.from({ length: n }, (_, i) => RunEvent.delta(String(i)))

describe("RunChannel", () => {
  it("settled waits for the run's terminal event while the producer may go on, and the reader then gets it all in one read", () => {
    const c = channel()
    let woken = 0
    c.whenReady(() => woken++, "settled")
    expect(c.emit(deltas(3))).toBe(true)
    expect(c.emit([RunEvent.delta("x")])).toBe(true)
    expect(woken).toBe(0)
    c.emit([RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })])
    expect(woken).toBe(1)
    c.end()
    expect(woken).toBe(1)
    const read = c.read()
    expect(read?._tag === "Events" ? [read.events.length, read.done] : read).toEqual([5, true])
  })

  it("settled wakes as the producer is asked to pause, so a collecting reader never stalls it", () => {
    const c = channel()
    let read: ReturnType<RunChannel["read"]>
    c.whenReady(() => {
      read = c.read()
    }, "settled")
    // The reader takes the full buffer inside the emit that filled it: the producer is not paused.
    expect(c.emit(deltas(HIGH_WATER_EVENTS))).toBe(true)
    expect(read?._tag === "Events" ? read.events.length : read).toBe(HIGH_WATER_EVENTS)
  })

  it("settled wakes at once when the run already ended or failed", () => {
    const ended = channel()
    ended.end()
    let a = 0
    ended.whenReady(() => a++, "settled")
    expect(a).toBe(1)
    const failed = channel()
    let b = 0
    failed.whenReady(() => b++, "settled")
    failed.fail(new RunIdle({ idleMs: 1 }))
    expect(b).toBe(1)
    expect(failed.read()).toMatchObject({ _tag: "Failed" })
  })

  it("stamps text batches as they arrive, not as they are read", () => {
    const c = channel()
    expect(c.timing).toEqual({ firstAt: undefined, lastAt: 0, batches: 0 })
    c.emit([RunEvent.failed("x")].slice(1))
    expect(c.timing.batches).toBe(0)
    c.emit(deltas(2))
    const first = c.timing.firstAt
    c.emit([RunEvent.reasoningDelta("r")])
    c.emit([RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })])
    expect(first).toBeTypeOf("number")
    expect(c.timing.firstAt).toBe(first)
    expect(c.timing.lastAt).toBeGreaterThanOrEqual(first ?? Infinity)
    expect(c.timing.batches).toBe(2)
  })
})

const complete = RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })
const readAll = (c: RunChannel) => {
  const out: Array<unknown> = []
  for (let r = c.read(); r !== undefined; r = c.read()) {
    if (r._tag === "Failed") {
      out.push(r.error._tag)
      break
    }
    out.push(...r.events.map((e) => e._tag))
    if (r.done) break
  }
  return out
}

describe("RunChannel, the one terminator", () => {
  it("accepts nothing after the first terminal event, at any split of the producer's batches", () => {
    const events = [RunEvent.delta("a"), RunEvent.delta("b"), complete, RunEvent.delta("late"), RunEvent.failed("x"), complete]
    for (let cut = 0; cut <= events.length; cut++) {
      const c = channel()
      c.emit(events.slice(0, cut))
      c.emit(events.slice(cut))
      c.end()
      c.fail(new RunIdle({ idleMs: 1 }))
      expect(readAll(c)).toEqual(["Delta", "Delta", "Complete"])
    }
  })

  it("an end without a terminal event is StreamClosed, after the events that came", () => {
    const c = channel()
    c.emit(deltas(2))
    c.end()
    expect(readAll(c)).toEqual(["Delta", "Delta", "StreamClosed"])
  })

  it("a failure after the terminal event changes nothing", () => {
    const c = channel()
    c.emit([complete])
    c.fail(new RunIdle({ idleMs: 1 }))
    expect(readAll(c)).toEqual(["Complete"])
  })
})

describe("RunChannel, started and progress", () => {
  it("started wakes at accept, or at the first batch when the producer never said it", () => {
    const a = channel()
    let woken = 0
    a.whenReady(() => woken++, "started")
    expect(woken).toBe(0)
    a.accept()
    expect([woken, a.accepted, a.read()]).toEqual([1, true, undefined])
    const b = channel()
    b.whenReady(() => woken++, "started")
    b.emit(deltas(1))
    expect([woken, b.accepted]).toEqual([2, true])
  })

  it("readable does not wake at accept (a reader that waits for events is not woken for nothing)", () => {
    const c = channel()
    let woken = 0
    c.whenReady(() => woken++)
    c.accept()
    expect(woken).toBe(0)
    c.emit(deltas(1))
    expect(woken).toBe(1)
  })

  it("progress is stamped when a batch arrives and when the reader takes one", () => {
    let now = 0
    const c = new RunChannel(() => now)
    now = 5
    c.emit(deltas(1))
    expect(c.lastProgressAt).toBe(5)
    now = 9
    c.read()
    expect(c.lastProgressAt).toBe(9)
    now = 12
    expect(c.read()).toBe(undefined)
    expect(c.lastProgressAt).toBe(9)
  })

  it("halt wakes a waiting reader with the error, and tells a held-up one through onTerminated", () => {
    const waiting = channel()
    const told: Array<string> = []
    waiting.onTerminated((e) => told.push(`waiting:${e._tag}`))
    let woken = 0
    waiting.whenReady(() => woken++)
    expect(waiting.readerWaiting).toBe(true)
    waiting.halt(new RunIdle({ idleMs: 1 }))
    expect([woken, told]).toEqual([1, []])
    const heldUp = channel()
    heldUp.onTerminated((e) => told.push(`held up:${e._tag}`))
    heldUp.emit(deltas(1))
    expect(heldUp.readerWaiting).toBe(false)
    heldUp.halt(new RunIdle({ idleMs: 1 }))
    expect(told).toEqual(["held up:RunIdle"])
    expect(readAll(heldUp)).toEqual(["Delta", "RunIdle"])
  })

  it("fail goes through the terminator it was given (the run service's terminate)", () => {
    const seen: Array<string> = []
    const c = new RunChannel(() => 0, (e) => seen.push(e._tag))
    c.fail(new RunIdle({ idleMs: 1 }))
    expect(seen).toEqual(["RunIdle"])
    expect(c.read()).toBe(undefined)
  })
})
