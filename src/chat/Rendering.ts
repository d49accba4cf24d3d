import type { RunOutcomeError } from "./errors.js"
import type { Emission } from "./session.js"

/**
 * What the response path (`Responder`) asks of an API's renderers: each dialect implements these for its wire
 * shapes; the response path knows nothing else of them.
 */

/** What a renderer knows of the run it renders. */
export interface RunInfo {
  readonly runId: string
  /** Unix seconds when the response started. */
  readonly created: number
}

/** The run id's own part (`run_<unique>` → `<unique>`): a response and its items are named after the run. */
export const runIdSuffix = (run: RunInfo): string => (run.runId.startsWith("run_") ? run.runId.slice(4) : run.runId)

/** One streamed response's renderer, built once per response (it may keep state: indices, sequence numbers). */
export interface StreamRenderer {
  /** The stream's opening events, written together with the run's first batch. */
  readonly head: string
  /** The text of one batch of emissions; a batch with the terminal emission ends the stream. */
  readonly batch: (emissions: ReadonlyArray<Emission>) => string
  /** An event written while the run is silent this long (Anthropic's `ping`), so clients and proxies see life. */
  readonly keepAlive?: string
  /**
   * For a response kept before it may end (the Responses API's stored responses): called once, after the last
   * batch was rendered (its terminal event held back by `batch`); the body writes `tail` and ends when it calls
   * back. The body's end is all it costs: nothing per batch.
   */
  readonly settle?: (end: (tail: string) => void) => void
}

/** How long a stream may be silent before it gets its keep-alive (every API's: one timer for every stream). */
export const KEEP_ALIVE_AFTER_MS = 5_000

/** The keep-alive of an SSE API without one of its own: a comment line, which every SSE client skips. */
export const SSE_COMMENT_KEEP_ALIVE = ": keep-alive\n\n"

/**
 * A response's items as typed values, for callers in code (`Responder.items`): built once per response. The
 * run's failure is never an item: it fails the caller's stream.
 */
export interface ItemRenderer<A> {
  /** The items that open the response, given with the run's first batch. */
  readonly head: ReadonlyArray<A>
  /** Appends the items of one emission. */
  readonly emission: (e: Exclude<Emission, { readonly _tag: "Error" }>, out: Array<A>) => void
}

/** A finished run's non-stream body, or the error it is answered with. */
export type Rendered<B = unknown> =
  | { readonly _tag: "Body"; readonly body: B }
  | { readonly _tag: "Error"; readonly error: RunOutcomeError }
