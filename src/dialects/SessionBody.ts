import { Readable } from "node:stream"
import type { ChatRun } from "../chat/ChatRun.js"
import type { Emission } from "../chat/session.js"

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
}

/**
 * A streamed response's body: the run's session polled and rendered from callbacks. A batch that arrived is
 * folded, rendered and pushed in the callback that brought it — one chunk, one socket write — with no fiber or
 * Stream step per batch; when the socket falls behind the body stops polling, the run's channel fills and the
 * provider pauses its upstream. Destroyed when the client leaves, which ends the request and so the run.
 */
export class SessionBody extends Readable {
  private waiting = false
  private finished = false

  constructor(private readonly options: SessionBodyOptions, head: string) {
    super({ highWaterMark: HIGH_WATER_BYTES })
    if (head !== "") this.push(head)
  }

  override _read(): void {
    if (!this.waiting) this.pump()
  }

  private readonly pump = (): void => {
    this.waiting = false
    if (this.finished || this.destroyed) return
    for (;;) {
      let text: string
      try {
        const out = this.options.run.poll()
        if (out === "ended") return this.close()
        if (out === "pending") {
          this.waiting = true
          return this.options.run.onReady(this.pump)
        }
        this.options.onBatch(out)
        text = this.options.render(out)
      } catch (defect) {
        this.push(this.options.onDefect(defect))
        return this.close()
      }
      if (text !== "" && !this.push(text)) return
    }
  }

  private close(): void {
    this.finished = true
    this.push(null)
  }
}
