import { Readable } from "node:stream"
import type { ChatRun } from "./ChatRun.js"
import type { Emission } from "./session.js"

/** What a body emits when the run was ended early while its socket held it up (see `SessionBody`). */
export const ABANDONED = "iop:abandoned"

/** Bytes a body holds unread by the socket before it stops polling the run (the run's channel then fills). */
const HIGH_WATER_BYTES = 64 * 1024

export interface SessionBodyOptions {
  readonly run: ChatRun
  /** The text of one batch of emissions (the dialect's renderer). */
  readonly render: (emissions: ReadonlyArray<Emission>) => string
  /** Told of every batch before it is rendered (the response notes its terminal). */
  readonly onBatch: (emissions: ReadonlyArray<Emission>) => void
  /** A defect (a bug) while polling or rendering: logs it and returns the stream's closing text. */
  readonly onDefect: (defect: unknown) => string
  /** The run plane's clock (keep-alive timing). */
  readonly now: () => number
  /** The renderer's `settle`: the body's last text and its end wait for it. */
  readonly settle?: ((end: (tail: string) => void) => void) | undefined
}

/**
 * A streamed response's body: the run's session polled and rendered from callbacks. A batch that arrived is
 * folded, rendered and pushed in the callback that brought it — one chunk, one socket write — with no fiber or
 * Stream step per batch; when the socket falls behind the body stops polling, the run's channel fills and the
 * provider pauses its upstream. Destroyed when the client leaves, which ends the request and so the run.
 *
 * A run the run plane ends early while the body is held up by its socket (a client that stopped reading: the
 * run's write stall) is abandoned: what is left is folded and pushed with its terminal error event, the body ends,
 * and it emits `ABANDONED`, for its writer to hand the socket what it takes and close the connection.
 */
export class SessionBody extends Readable {
  private waiting = false
  private finished = false
  private lastPushAt: number

  constructor(private readonly options: SessionBodyOptions, head: string) {
    super({ highWaterMark: HIGH_WATER_BYTES })
    this.lastPushAt = options.now()
    if (head !== "") this.push(head)
    options.run.onTerminated(this.abandon)
  }

  /** The run was ended early while the body was held up by its socket: everything left is pushed, then let go. */
  private readonly abandon = (): void => {
    if (this.destroyed) return
    for (;;) {
      if (this.finished) break
      const text = this.next()
      if (text === undefined) break
      if (text !== "") this.push(text)
    }
    this.emit(ABANDONED)
  }

  /** When the body last wrote (the run plane's clock): a keep-alive is due after a silence. */
  get lastWriteAt(): number {
    return this.lastPushAt
  }

  /** Writes `text` (a keep-alive) unless the body ended; whether it did. */
  keepAlive(text: string): boolean {
    if (this.finished || this.destroyed) return false
    this.lastPushAt = this.options.now()
    this.push(text)
    return true
  }

  override _read(): void {
    if (!this.waiting) this.pump()
  }

  private readonly pump = (): void => {
    this.waiting = false
    if (this.finished || this.destroyed) return
    for (;;) {
      const text = this.next()
      if (text === undefined) {
        if (this.finished) return
        this.waiting = true
        return this.options.run.whenReady(this.pump)
      }
      if (text === "") continue
      this.lastPushAt = this.options.now()
      if (!this.push(text)) return
    }
  }

  /** The next batch's text; `undefined` when nothing is there yet, or the body has ended. */
  private next(): string | undefined {
    try {
      const out = this.options.run.poll()
      if (out === "ended") {
        this.close()
        return undefined
      }
      if (out === "pending") return undefined
      this.options.onBatch(out)
      return this.options.render(out)
    } catch (defect) {
      this.push(this.options.onDefect(defect))
      this.close()
      return undefined
    }
  }

  private close(): void {
    if (this.finished) return
    this.finished = true
    const settle = this.options.settle
    if (settle === undefined) this.push(null)
    else settle((tail) => endWith(this, tail))
  }
}

/** Pushes `tail` and the end into a body (nothing once it was destroyed: its client left). */
const endWith = (body: Readable, tail: string): void => {
  if (body.destroyed) return
  if (tail !== "") body.push(tail)
  body.push(null)
}

/** A body of known text whose end waits for `settle` (a collected response that is kept first). */
export const settledBody = (text: string, settle: (end: (tail: string) => void) => void): Readable => {
  const body = new Readable({ read: () => undefined })
  body.push(text)
  settle((tail) => endWith(body, tail))
  return body
}
