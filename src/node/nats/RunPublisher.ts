import * as RunEvent from "../../protocol/RunEvent.js"
import type { RunSink } from "../../protocol/RunSink.js"
import type { BusError, NatsConnection } from "./NatsBus.js"
import * as C from "./credit.js"
import { encodeRunEvents } from "./eventsWire.js"
import * as P from "./protocol.js"

/**
 * The node's sink for one run: the batches emitted in one tick (a provider
 * gets one per upstream chunk, often dozens per socket read) are published to
 * the run's edge as one message at the end of that tick (or, when they would
 * not fit, as several: see `P.fitBatch`), numbered per message. That is no
 * later than the client's own write of them (it flushes on a microtask too),
 * so the first token is not delayed. Publishing is synchronous (the client
 * buffers), so nothing here waits for the edge; what holds the provider back
 * is the edge's credit (credit.ts): once the bytes published reach what the
 * edge granted, `emit` answers `false` and the next batch waits here until a
 * RunCredit (`credit`) lets it go and resumes the provider. A terminal event
 * goes at once, credit or not, as the run's last message (`end`); so do the
 * provider's `end` and `fail`. Batches are sent whole: the edge's run channel
 * is the one terminator.
 */
export interface RunPublisher extends RunSink {
  /** Publishes nothing more; with a message, the edge is first told with a Cancelled event (unless the run ended). */
  readonly stop: (cancelled?: string) => void
  /** The edge's RunCredit: messages may be published until their bytes reach `granted` (cumulative). */
  readonly credit: (granted: number) => void
}

export const makePublisher = (
  bus: NatsConnection.Service,
  start: P.RunStart,
  /** The run is over (its last message sent, or publishing failed): called once. */
  finished: (error: BusError | undefined) => void
): RunPublisher => {
  let seq = 0
  let ended = false
  /** Bytes of the run's messages published, and what the edge granted. */
  let sent = 0
  let granted = start.window
  /** `accept()` was called and no message has told the edge yet. */
  let accepted = false
  /** What `awaitWhole` said last, until a message tells the edge. */
  let whole: boolean | undefined
  /** `progress()` was called and no message has told the edge yet. */
  let progressed = false
  /** A message went: the edge knows the run was accepted (its first events imply it). */
  let told = false
  /** Batches emitted (this tick, or while out of credit), not published yet (the first as emitted, more joined). */
  let pending: ReadonlyArray<RunEvent.RunEvent> | undefined
  let joined: Array<RunEvent.RunEvent> | undefined
  let scheduled = false
  /** The provider's, while it waits for credit. */
  let resume: (() => void) | undefined

  const encode = (events: ReadonlyArray<RunEvent.RunEvent>, end: boolean): Uint8Array =>
    encodeRunEvents(
      accepted || whole !== undefined || progressed || end
        ? {
          v: P.PROTOCOL_VERSION,
          runId: start.runId,
          seq,
          ...(accepted ? { accepted } : {}),
          ...(whole !== undefined ? { whole } : {}),
          ...(progressed ? { progress: true } : {}),
          ...(end ? { end } : {}),
          events
        }
        : { v: P.PROTOCOL_VERSION, runId: start.runId, seq, events }
    )

  const send = (data: Uint8Array): BusError | undefined => {
    const error = bus.unsafePublish(start.eventsSubject, data)
    if (error !== undefined) return error
    seq += 1
    sent += data.length
    accepted = false
    whole = undefined
    progressed = false
    told = true
    return undefined
  }

  /** Publishes `events` (maybe none), in one message when they fit; `end` on the last. */
  const publish = (events: ReadonlyArray<RunEvent.RunEvent>, end: boolean): BusError | undefined => {
    const maxPayload = bus.maxPayload()
    if (P.mayFit(events, maxPayload)) {
      const data = encode(events, end)
      if (data.length <= maxPayload) return send(data)
    }
    const messages = P.fitBatch(start.runId, events, maxPayload)
    for (let i = 0; i < messages.length; i++) {
      const error = send(encode(messages[i] ?? [], end && i === messages.length - 1))
      if (error !== undefined) return error
    }
    return undefined
  }

  const finish = (error: BusError | undefined) => {
    ended = true
    resume = undefined
    pending = joined = undefined
    // Not from inside the provider's `emit`: closing the run there would abort its upstream body before it
    // saw its own terminal event, so every run would cost a new upstream connection instead of reusing one.
    queueMicrotask(() => finished(error))
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

  /** Publishes what waits, if the credit allows. */
  const flush = () => {
    if (ended || (pending === undefined && !accepted && whole === undefined && !progressed) || !C.mayPublish(sent, granted)) {
      return
    }
    const error = publish(take(), false)
    if (error !== undefined) finish(error)
  }

  const schedule = () => {
    if (scheduled) return
    scheduled = true
    queueMicrotask(() => {
      scheduled = false
      flush()
    })
  }

  /** The run's last message: what waits, then `last`, whatever the credit. */
  const close = (last?: ReadonlyArray<RunEvent.RunEvent>) => {
    if (!ended) finish(publish(take(last), true))
  }

  const hasTerminal = (events: ReadonlyArray<RunEvent.RunEvent>): boolean => {
    for (const event of events) if (RunEvent.isTerminal(event)) return true
    return false
  }

  return {
    emit: (events) => {
      if (ended) return true
      if (events.length === 0) return C.mayPublish(sent, granted)
      // The node's run ends with its terminal event: the batch goes whole, at once, with what waits.
      if (hasTerminal(events)) {
        close(events)
        return true
      }
      if (pending === undefined) pending = events
      else {
        if (joined === undefined) pending = joined = [...pending]
        for (const event of events) joined.push(event)
      }
      schedule()
      return C.mayPublish(sent, granted)
    },
    accept: () => {
      if (ended || told || accepted) return
      accepted = true
      schedule()
    },
    awaitWhole: (waiting) => {
      if (ended) return
      whole = waiting
      schedule()
    },
    progress: () => {
      if (ended || progressed) return
      progressed = true
      schedule()
    },
    end: () => close(),
    fail: (error) => close([RunEvent.failed(error.message)]),
    onReady: (f) => {
      if (!ended) resume = f
    },
    credit: (offered) => {
      granted = C.raise(granted, offered)
      flush()
      if (ended || resume === undefined || !C.mayPublish(sent, granted)) return
      const f = resume
      resume = undefined
      f()
    },
    stop: (cancelled) => {
      if (ended) return
      ended = true
      resume = undefined
      const waiting = take()
      if (cancelled !== undefined) publish([...waiting, RunEvent.cancelled(cancelled)], true)
    }
  }
}
