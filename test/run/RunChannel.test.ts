import { describe, expect, it } from "@effect/vitest"
import { HIGH_WATER_EVENTS, RunChannel } from "../../src/run/RunChannel.js"
import * as RunEvent from "../../src/run/RunEvent.js"
import { RunIdle } from "../../src/run/errors.js"

const channel = () => new RunChannel(() => 0)
const deltas = (n: number) => Array.from({ length: n }, (_, i) => RunEvent.delta(String(i)))

describe("RunChannel", () => {
  it("onSettled waits for the run's end while the producer may go on, and the reader then gets it all in one read", () => {
    const c = channel()
    let woken = 0
    c.onSettled(() => woken++)
    expect(c.emit(deltas(3))).toBe(true)
    expect(c.emit([RunEvent.delta("x")])).toBe(true)
    expect(woken).toBe(0)
    c.emit([RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })])
    expect(woken).toBe(0)
    c.end()
    expect(woken).toBe(1)
    const read = c.read()
    expect(read?._tag === "Events" ? [read.events.length, read.done] : read).toEqual([5, true])
  })

  it("onSettled wakes as the producer is asked to pause, so a collecting reader never stalls it", () => {
    const c = channel()
    let read: ReturnType<RunChannel["read"]>
    c.onSettled(() => {
      read = c.read()
    })
    // The reader takes the full buffer inside the emit that filled it: the producer is not paused.
    expect(c.emit(deltas(HIGH_WATER_EVENTS))).toBe(true)
    expect(read?._tag === "Events" ? read.events.length : read).toBe(HIGH_WATER_EVENTS)
  })

  it("onSettled wakes at once when the run already ended or failed", () => {
    const ended = channel()
    ended.end()
    let a = 0
    ended.onSettled(() => a++)
    expect(a).toBe(1)
    const failed = channel()
    let b = 0
    failed.onSettled(() => b++)
    failed.fail(new RunIdle({ idleMs: 1 }))
    expect(b).toBe(1)
    expect(failed.read()).toMatchObject({ _tag: "Failed" })
  })

  it("stamps text batches as they arrive, not as they are read", () => {
    const c = channel()
    expect(c.timing).toEqual({ firstAt: undefined, lastAt: 0, batches: 0 })
    c.emit([RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })])
    expect(c.timing.batches).toBe(0)
    c.emit(deltas(2))
    const first = c.timing.firstAt
    c.emit([RunEvent.reasoningDelta("r")])
    expect(first).toBeTypeOf("number")
    expect(c.timing.firstAt).toBe(first)
    expect(c.timing.lastAt).toBeGreaterThanOrEqual(first ?? Infinity)
    expect(c.timing.batches).toBe(2)
  })
})
