import { describe, expect, it } from "@effect/vitest"
import { StreamClosed } from "../../../src/protocol/errors.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import { RunId } from "../../../src/protocol/RunEvent.js"
import { decodeRunEvents } from "../../../src/node/nats/eventsWire.js"
import type { NatsConnection } from "../../../src/node/nats/NatsBus.js"
import * as P from "../../../src/node/nats/protocol.js"
import { makePublisher } from "../../../src/node/nats/RunPublisher.js"
import { request } from "./harness.js"

/** A node's publisher over a bus that records what it is given, as the edge would decode it. */
const setUp = (window: number) => {
  const sent: Array<P.RunEventsMsg & { readonly bytes: number }> = []
  const finished: Array<unknown> = []
  const bus: Partial<NatsConnection.Service> = {
    unsafePublish: (_subject, data) => {
      const decoded = decodeRunEvents(data)
      if (decoded._tag === "Ok") sent.push({ ...decoded.value, bytes: data.length })
      return undefined
    },
    maxPayload: () => 1024 * 1024
  }
  const start: P.RunStart = {
    v: P.PROTOCOL_VERSION,
    runId: RunId.make("run_p"),
    edgeId: "e",
    request: request("hi"),
    eventsSubject: "events",
    window
  }
  const publisher = makePublisher(bus as NatsConnection.Service, start, (error) => finished.push(error))
  return { publisher, sent, finished }
}

/** The end of the tick: the publisher sends what was emitted in it. */
const tick = () => new Promise<void>((resolve) => queueMicrotask(resolve))

const done = RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })

describe("RunPublisher", () => {
  it("publishes until what it sent reaches the grant (one message over at most), then answers false and holds the next batch until a credit", async () => {
    const { publisher, sent } = setUp(100)
    expect(publisher.emit([RunEvent.delta("a".repeat(80))])).toBe(true)
    expect(publisher.emit([RunEvent.delta("b".repeat(80))])).toBe(true)
    await tick()
    // The tick's batch goes whole, over the grant.
    expect(sent.map((m) => m.events.length)).toEqual([2])
    expect(sent[0]?.bytes).toBeGreaterThan(100)
    expect(publisher.emit([RunEvent.delta("c")])).toBe(false)
    let resumed = 0
    publisher.onReady(() => void (resumed += 1))
    await tick()
    expect(sent).toHaveLength(1)
    // Less than what was sent, or an old total again: nothing moves.
    publisher.credit(100)
    publisher.credit(50)
    expect([sent.length, resumed]).toEqual([1, 0])
    publisher.credit(10_000)
    expect(sent.map((m) => m.events)).toEqual([[RunEvent.delta("a".repeat(80)), RunEvent.delta("b".repeat(80))], [RunEvent.delta("c")]])
    expect(resumed).toBe(1)
    publisher.credit(10_000)
    expect(resumed).toBe(1)
    expect(sent.map((m) => m.seq)).toEqual([0, 1])
  })

  it("a credit that the held batch spends again does not resume the provider", async () => {
    const { publisher, sent } = setUp(10)
    publisher.emit([RunEvent.delta("a".repeat(50))])
    await tick()
    expect(publisher.emit([RunEvent.delta("b".repeat(500))])).toBe(false)
    let resumed = 0
    publisher.onReady(() => void (resumed += 1))
    publisher.credit((sent[0]?.bytes ?? 0) + 10)
    expect(sent).toHaveLength(2)
    expect(resumed).toBe(0)
    publisher.credit((sent[0]?.bytes ?? 0) + (sent[1]?.bytes ?? 0) + 10)
    expect(resumed).toBe(1)
  })

  it("progress (a native tool call streaming) tells the edge once per tick, in a message of its own or with the events", async () => {
    const { publisher, sent } = setUp(10_000)
    publisher.progress?.()
    publisher.progress?.()
    await tick()
    publisher.progress?.()
    publisher.emit([RunEvent.delta("a")])
    await tick()
    await tick()
    expect(sent.map((m) => [m.progress, m.events.length])).toEqual([[true, 0], [true, 1]])
    publisher.emit([RunEvent.delta("b")])
    await tick()
    expect(sent[2]?.progress).toBeUndefined()
  })

  it("a terminal goes at once, credit or not, with what waits and `end`; the batch is whole; nothing after it", async () => {
    const { publisher, sent, finished } = setUp(1)
    publisher.emit([RunEvent.delta("x")])
    await tick()
    expect(publisher.emit([RunEvent.delta("held")])).toBe(false)
    await tick()
    expect(publisher.emit([RunEvent.delta("y"), done, RunEvent.delta("after")])).toBe(true)
    expect(sent.at(-1)).toMatchObject({ seq: 1, end: true, events: [RunEvent.delta("held"), RunEvent.delta("y"), done, RunEvent.delta("after")] })
    publisher.emit([RunEvent.delta("later")])
    publisher.end()
    publisher.credit(1_000_000)
    await tick()
    expect(sent).toHaveLength(2)
    expect(finished).toEqual([undefined])
  })

  it("end() sends what waits with `end` and no invented failure; fail(e) sends a Failed with its message", async () => {
    const ended = setUp(1000)
    ended.publisher.emit([RunEvent.delta("half")])
    ended.publisher.end()
    expect(ended.sent).toEqual([expect.objectContaining({ seq: 0, end: true, events: [RunEvent.delta("half")] })])
    await tick()
    expect(ended.finished).toEqual([undefined])

    const empty = setUp(1000)
    empty.publisher.end()
    expect(empty.sent).toEqual([expect.objectContaining({ seq: 0, end: true, events: [] })])

    const failed = setUp(1000)
    failed.publisher.fail(new StreamClosed())
    expect(failed.sent).toEqual([expect.objectContaining({ end: true, events: [RunEvent.failed("run stream closed")] })])
  })

  it("accept() goes at the end of the tick, alone or with the tick's events, once", async () => {
    const alone = setUp(1000)
    alone.publisher.accept()
    await tick()
    alone.publisher.emit([RunEvent.delta("a")])
    alone.publisher.accept()
    await tick()
    expect(alone.sent.map((m) => [m.accepted, m.events])).toEqual([[true, []], [undefined, [RunEvent.delta("a")]]])

    const together = setUp(1000)
    together.publisher.accept()
    together.publisher.emit([RunEvent.delta("a")])
    await tick()
    expect(together.sent.map((m) => [m.accepted, m.events])).toEqual([[true, [RunEvent.delta("a")]]])

    // After the first events the edge knows: nothing more to say.
    const late = setUp(1000)
    late.publisher.emit([RunEvent.delta("a")])
    await tick()
    late.publisher.accept()
    await tick()
    expect(late.sent.map((m) => m.accepted)).toEqual([undefined])
  })

  it("stop(reason) tells the edge with a Cancelled after what waits, credit or not; stop() says nothing", async () => {
    const { publisher, sent } = setUp(1)
    publisher.emit([RunEvent.delta("x")])
    await tick()
    publisher.emit([RunEvent.delta("held")])
    publisher.stop("node shutting down")
    expect(sent.at(-1)).toMatchObject({ end: true, events: [RunEvent.delta("held"), RunEvent.cancelled("node shutting down")] })
    const quiet = setUp(1000)
    quiet.publisher.emit([RunEvent.delta("x")])
    quiet.publisher.stop()
    await tick()
    expect(quiet.sent).toEqual([])
  })
})
