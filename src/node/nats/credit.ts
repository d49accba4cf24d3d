/**
 * Flow control of a run's events over the bus, in bytes of run-events messages (as sent, as received: the same
 * count on both sides). The edge grants the node a cumulative total; the node publishes while what it sent is
 * below it (the message that crosses it goes whole: at most one message over), and its provider pauses when it
 * is not. The edge counts what its reader consumed and grants `consumed + window` once that gets within half a
 * window of the grant: a credit message per half window at most, and a stalled reader holds the edge to the
 * window plus one message. Pure: numbers in, numbers out, a comparison or two per message.
 */

/** Bytes of run events a node may publish ahead of the edge's reader (carried in RunStart). */
export const CREDIT_WINDOW = 256 * 1024

/** Node side: may another message be published (what was sent is below what was granted)? */
export const mayPublish = (sent: number, granted: number): boolean => sent < granted

/** Node side: a RunCredit's total, taken in. Cumulative, so a repeated or reordered one changes nothing. */
export const raise = (granted: number, offered: number): number => (offered > granted ? offered : granted)

/**
 * Edge side: the grant once the reader consumed `consumed` bytes: the same `granted` while more than half a
 * window is still granted ahead of the reader, else `consumed + window` (sent to the node as a RunCredit).
 */
export const regrant = (consumed: number, granted: number, window: number): number =>
  granted - consumed > window / 2 ? granted : consumed + window
