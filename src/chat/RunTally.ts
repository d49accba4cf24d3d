import type { Chunk } from "effect/Chunk"
import type { Usage } from "../run/RunEvent.js"
import type { Emission, SessionInput, Terminal } from "./session.js"

const PREVIEW_CHARS = 1000
const cap = (s: string): string => (s.length > PREVIEW_CHARS ? s.slice(0, PREVIEW_CHARS) : s)

/**
 * What one run did, for its log line and metrics: counts of what was emitted
 * and when the node's events arrived. Private to one response and written
 * from its own stream only; times come from `performance.now()` because they
 * measure this process, not the domain's clock.
 */
export class RunTally {
  terminal: Terminal | undefined = undefined
  contentChars = 0
  reasoningChars = 0
  toolCalls = 0
  normalised = false
  /** From the run's Complete event: counted even when the response then fails tool validation. */
  usage: Usage | undefined = undefined
  /** The first characters of content and reasoning, logged at debug level. */
  contentPreview = ""
  reasoningPreview = ""
  private readonly submittedAt: number
  private firstTokenAt: number | undefined = undefined
  private lastTokenAt = 0
  private tokenEvents = 0
  private chunkArrivedAt = 0
  /** Time spent turning node events into response chunks. */
  processingMs = 0
  /** Time from the chat plane getting the request to the run being dispatched. */
  readonly dispatchMs: number

  constructor(requestedAt: number) {
    this.submittedAt = performance.now()
    this.dispatchMs = this.submittedAt - requestedAt
  }

  /** A chunk of node events arrived. */
  arrived(inputs: Chunk<SessionInput>): void {
    const now = performance.now()
    this.chunkArrivedAt = now
    for (const input of inputs) {
      if (input._tag === "Complete") this.usage = input.usage
      if (input._tag !== "Delta" && input._tag !== "ReasoningDelta") continue
      if (this.firstTokenAt === undefined) this.firstTokenAt = now
      this.lastTokenAt = now
      this.tokenEvents += 1
    }
  }

  /** The chunk that arrived last was turned into emissions (and chunks): */
  processed(emissions: Chunk<Emission>): void {
    this.processingMs += performance.now() - this.chunkArrivedAt
    for (const e of emissions) this.observe(e)
  }

  observe(e: Emission): void {
    switch (e._tag) {
      case "Content":
        this.contentChars += e.text.length
        if (this.contentPreview.length < PREVIEW_CHARS) this.contentPreview = cap(this.contentPreview + e.text)
        break
      case "Reasoning":
        this.reasoningChars += e.text.length
        if (this.reasoningPreview.length < PREVIEW_CHARS) this.reasoningPreview = cap(this.reasoningPreview + e.text)
        break
      case "ToolCalls":
        this.toolCalls += e.calls.length
        this.normalised ||= e.wrapped === true
        break
      case "Finish":
        this.terminal = e
        break
      case "Error":
        this.terminal = e
        break
    }
  }

  /** Time to the first token event, from dispatch. */
  get ttftMs(): number | undefined {
    return this.firstTokenAt === undefined ? undefined : this.firstTokenAt - this.submittedAt
  }

  /** Mean time between token events after the first. */
  get interTokenMs(): number | undefined {
    return this.tokenEvents < 2 || this.firstTokenAt === undefined
      ? undefined
      : (this.lastTokenAt - this.firstTokenAt) / (this.tokenEvents - 1)
  }

  get overheadMs(): number {
    return this.dispatchMs + this.processingMs
  }
}
