import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import * as C from "../../../src/node/nats/credit.js"

describe("credit", () => {
  it("the node publishes while what it sent is below the grant: the message that crosses it is the last", () => {
    expect(C.mayPublish(0, 10)).toBe(true)
    expect(C.mayPublish(9, 10)).toBe(true)
    expect(C.mayPublish(10, 10)).toBe(false)
    expect(C.mayPublish(25, 10)).toBe(false)
  })

  it("a RunCredit is cumulative: a repeated or late one changes nothing", () => {
    expect(C.raise(10, 30)).toBe(30)
    expect(C.raise(30, 30)).toBe(30)
    expect(C.raise(30, 20)).toBe(30)
  })

  it("the edge grants a window ahead of its reader once less than half a window is left", () => {
    expect(C.regrant(0, 100, 100)).toBe(100)
    expect(C.regrant(49, 100, 100)).toBe(100)
    expect(C.regrant(50, 100, 100)).toBe(150)
    expect(C.regrant(400, 100, 100)).toBe(500)
  })

  /**
   * A node, the bus and an edge whose reader consumes when the script says: messages of arbitrary sizes, credits
   * delivered late, twice or out of order.
   */
  const step = FastCheck.constantFrom("publish", "deliver", "read", "credit", "stale")
  it.prop(
    "the edge holds at most a window and one message; a credit per half window at most; a reader that reads gets everything",
    [
      FastCheck.array(FastCheck.integer({ min: 1, max: 3000 }), { minLength: 1, maxLength: 200 }),
      FastCheck.array(step, { maxLength: 2000 }),
      FastCheck.integer({ min: 2, max: 4096 })
    ],
    ([sizes, script, window]) => {
      const maxMessage = Math.max(...sizes)
      let next = 0 // the node's next message
      let sent = 0
      let nodeGranted = window
      const wire: Array<number> = []
      const buffered: Array<number> = []
      let consumed = 0
      let edgeGranted = window
      const credits: Array<number> = []
      let creditCount = 0
      const publish = () => {
        const size = sizes[next]
        if (size === undefined || !C.mayPublish(sent, nodeGranted)) return false
        next += 1
        sent += size
        wire.push(size)
        return true
      }
      const read = () => {
        for (const size of buffered.splice(0)) consumed += size
        const granted = C.regrant(consumed, edgeGranted, window)
        if (granted !== edgeGranted) {
          edgeGranted = granted
          creditCount += 1
          credits.push(granted)
        }
      }
      const check = () => {
        // What the edge received and its reader has not consumed: the edge's memory for the run.
        const received = consumed + buffered.reduce((a, b) => a + b, 0)
        expect(received - consumed).toBeLessThanOrEqual(window + maxMessage)
        expect(sent - consumed).toBeLessThanOrEqual(window + maxMessage)
        expect(creditCount).toBeLessThanOrEqual(Math.floor(consumed / (window / 2)) + 1)
      }
      for (const action of script) {
        switch (action) {
          case "publish":
            publish()
            break
          case "deliver":
            buffered.push(...wire.splice(0))
            break
          case "read":
            read()
            break
          case "credit": {
            const credit = credits.shift()
            if (credit !== undefined) nodeGranted = C.raise(nodeGranted, credit)
            break
          }
          case "stale":
            // An old credit again (duplicated or overtaken): nothing changes.
            nodeGranted = C.raise(nodeGranted, Math.max(window, edgeGranted - window))
            break
        }
        check()
      }
      // Then a reader that keeps up: everything arrives, nothing deadlocks.
      for (let rounds = 0; next < sizes.length || wire.length + buffered.length + credits.length > 0; rounds++) {
        expect(rounds).toBeLessThan(10 * sizes.length + 10)
        while (publish()) check()
        buffered.push(...wire.splice(0))
        read()
        for (const credit of credits.splice(0)) nodeGranted = C.raise(nodeGranted, credit)
        check()
      }
      expect(consumed).toBe(sizes.reduce((a, b) => a + b, 0))
    }
  )
})
