import * as RunEvent from "../../RunEvent.js"
import type { RunSink } from "../../RunSink.js"
import type { BusError, NatsConnection } from "./NatsBus.js"
import { encodeRunEvents } from "./eventsWire.js"
import * as P from "./protocol.js"

/**
 * The node's sink for one run: the batches emitted in one tick (a provider
 * gets one per upstream chunk, often dozens per socket read) are published to
 * the run's edge as one message at the end of that tick (or, when they would
 * not fit, as several: see `P.fitBatch`), numbered per message. That is no
 * later than the client's own write of them (it flushes on a microtask too),
 * so the first token is not delayed. Publishing is synchronous (the client
 * buffers), so nothing here waits for the edge.
 */
export interface RunPublisher extends RunSink {
  /** Publishes nothing more; with a message, the edge is first told with a Cancelled event (unless the run ended). */
  readonly stop: (cancelled?: string) => void
}

export const makePublisher = (
  bus: NatsConnection.Service,
  start: P.RunStart,
  /** The run is over (terminal sent, the provider ended, or publishing failed): called once. */
  finished: (error: BusError | undefined) => void
): RunPublisher => {
  let seq = 0
  let ended = false
  /** Batches emitted this tick, not published yet (the first as emitted, more joined into a copy). */
  let pending: ReadonlyArray<RunEvent.RunEvent> | undefined
  let joined: Array<RunEvent.RunEvent> | undefined

  const encode = (events: ReadonlyArray<RunEvent.RunEvent>) =>
    encodeRunEvents({ v: P.PROTOCOL_VERSION, runId: start.runId, seq, events })

  const send = (data: Uint8Array): BusError | undefined => {
    const error = bus.unsafePublish(start.eventsSubject, data)
    if (error === undefined) seq += 1
    return error
  }

  /** Publishes `events`, in one message when they fit; `true` when a terminal event went out (the run is over). */
  const publish = (events: ReadonlyArray<RunEvent.RunEvent>): BusError | boolean => {
    const maxPayload = bus.maxPayload()
    if (P.mayFit(events, maxPayload)) {
      const data = encode(events)
      if (data.length <= maxPayload) return send(data) ?? events.some(RunEvent.isTerminal)
    }
    let terminal = false
    for (const batch of P.fitBatch(start.runId, events, maxPayload)) {
      const error = send(encode(batch))
      if (error !== undefined) return error
      terminal = terminal || batch.some(RunEvent.isTerminal)
    }
    return terminal
  }

  const finish = (result: BusError | boolean) => {
    if (result === false) return
    ended = true
    // Not from inside the provider's `emit`: closing the run there would abort its upstream body before it
    // saw its own terminal event, so every run would cost a new upstream connection instead of reusing one.
    queueMicrotask(() => finished(result === true ? undefined : result))
  }

  /** What waits to be published, with `last` after it; clears it. */
  const take = (last?: ReadonlyArray<RunEvent.RunEvent>): ReadonlyArray<RunEvent.RunEvent> => {
    const waiting = pending
    const more = joined
    pending = joined = undefined
    if (waiting === undefined) return last ?? []
    if (last === undefined) return waiting
    const all = more ?? [...waiting]
    for (const event of last) all.push(event)
    return all
  }

  const flush = () => {
    if (!ended && pending !== undefined) finish(publish(take()))
  }

  /** The run ends with this (terminal) event, after what waits, unless it already ended. */
  const endWith = (event: RunEvent.RunEvent) => {
    if (!ended) finish(publish(take([event])))
  }

  return {
    emit: (events) => {
      if (ended || events.length === 0) return true
      // Nothing after the first terminal event leaves the node; a terminal batch goes at once, with what waits.
      const terminal = events.findIndex(RunEvent.isTerminal)
      if (terminal !== -1) {
        finish(publish(take(terminal === events.length - 1 ? events : events.slice(0, terminal + 1))))
      } else if (pending === undefined) {
        pending = events
        queueMicrotask(flush)
      } else {
        if (joined === undefined) pending = joined = [...pending]
        for (const event of events) joined.push(event)
      }
      // The bus cannot pause: a slow edge is the bus's concern (and the edge's idle watchdog's), never the provider's.
      return true
    },
    accept: () => {},
    end: () => endWith(RunEvent.failed("provider ended the run without completing it")),
    fail: (error) => endWith(RunEvent.failed(error.message)),
    onReady: () => {},
    stop: (cancelled) => {
      if (ended) return
      ended = true
      const waiting = take()
      if (cancelled !== undefined) publish([...waiting, RunEvent.cancelled(cancelled)])
    }
  }
}
