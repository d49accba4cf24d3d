import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { ModelOptions } from "../../protocol/ModelOptions.js"
import { primaryIssue } from "../../common/parseIssues.js"
import { NodeId, RunEvent, RunId, type TokenLogprob } from "../../protocol/RunEvent.js"
import { SubmitRunRequest } from "../../protocol/SubmitRunRequest.js"
import { SubjectToken } from "./BusConfig.js"

/**
 * The edge↔node wire over NATS: versioned JSON messages, their subjects, the
 * per-run sequence check and the cutting of a run's batches into messages
 * the server accepts. Pure: no Effect runtime, no client.
 */

/**
 * 2: a run-events message carries a batch (one provider read), not one event.
 * 3: credit-based flow control (RunStart's `window`, RunCredit); run-events messages say `accepted` and `end`.
 * 4: the request's `wholeAnswer`; run-events messages say `whole` (the node's provider waits on a whole answer):
 *    an edge of 3 would end such a run at its idle timeout, so the version tells them apart.
 *    Later, within 4: run-events messages may say `progress` (optional: a node that does not send it only leaves
 *    its native tool calls unseen by the edge's idle and first-token bounds, as before).
 */
export const PROTOCOL_VERSION = 4

const V = Schema.Literal(PROTOCOL_VERSION)

export { SubjectPrefix, SubjectToken } from "./BusConfig.js"

export const isSubjectToken = Schema.is(SubjectToken)

// JSON has no Infinity: an unlimited node travels as `null`.
const Capacity = Schema.transform(Schema.NullOr(Schema.Int.pipe(Schema.positive())), Schema.Number, {
  strict: true,
  decode: (n) => n ?? Number.POSITIVE_INFINITY,
  encode: (n) => (Number.isFinite(n) ? n : null)
})

const Count = Schema.Int.pipe(Schema.nonNegative())

/** A node's heartbeat: what it serves and how busy it is. `instanceId` changes when the process restarts. */
export const NodeAnnounce = Schema.Struct({
  v: V,
  nodeId: NodeId,
  instanceId: Schema.String,
  /** Each model's options (what the edge's chat plane applies), never its provider: no upstream, no secret. */
  models: Schema.Array(ModelOptions),
  maxConcurrentRuns: Capacity,
  inFlight: Count,
  draining: Schema.Boolean
})
export type NodeAnnounce = typeof NodeAnnounce.Type

export const NodeLeave = Schema.Struct({ v: V, nodeId: NodeId, instanceId: Schema.String })
export type NodeLeave = typeof NodeLeave.Type

export const RunStart = Schema.Struct({
  v: V,
  runId: RunId,
  edgeId: Schema.String,
  request: SubmitRunRequest,
  eventsSubject: Schema.String,
  /** Bytes of run-events messages the node may publish before the edge grants more (see credit.ts). */
  window: Schema.Int.pipe(Schema.positive())
})
export type RunStart = typeof RunStart.Type

export const RunAccepted = Schema.TaggedStruct("RunAccepted", { v: V })
export const RunRefused = Schema.TaggedStruct("RunRefused", { v: V, reason: Schema.String })
/** The node's reply to a RunStart. */
export const RunReply = Schema.Union(RunAccepted, RunRefused)
export type RunReply = typeof RunReply.Type

/**
 * One message of a run's events: a batch, in order; `seq` counts the run's messages (0, 1, 2, …). `accepted`:
 * the node's provider accepted the run (its upstream answered), before these events if any. `end`: the node
 * publishes nothing more for the run (its provider ended, failed or sent a terminal event, or it was stopped).
 * `whole`: the node's provider waits on a whole answer, or no longer does (`RunSink.awaitWhole`), before these
 * events if any. `progress`: its upstream produced output that has no event yet (`RunSink.progress`: a native tool
 * call), before these events if any.
 * Read and written by the hot-path codec in eventsWire.ts, held to this schema by a property test.
 */
export const RunEventsMsg = Schema.Struct({
  v: V,
  runId: RunId,
  seq: Count,
  accepted: Schema.optional(Schema.Boolean),
  whole: Schema.optional(Schema.Boolean),
  progress: Schema.optional(Schema.Boolean),
  end: Schema.optional(Schema.Boolean),
  events: Schema.Array(RunEvent)
})
export type RunEventsMsg = typeof RunEventsMsg.Type

/**
 * The edge's reader consumed enough of the run: the node may publish run-events messages until their bytes
 * reach `granted` (a cumulative total: a repeated or late one changes nothing).
 */
export const RunCredit = Schema.Struct({ v: V, runId: RunId, granted: Count })
export type RunCredit = typeof RunCredit.Type

export const RunCancel = Schema.Struct({ v: V, runId: RunId, reason: Schema.String })
export type RunCancel = typeof RunCancel.Type

export const EdgeHeartbeat = Schema.Struct({ v: V, edgeId: Schema.String })
export type EdgeHeartbeat = typeof EdgeHeartbeat.Type

// ---------------------------------------------------------------------------
// Subjects

export interface Subjects {
  readonly announce: string
  readonly leave: string
  readonly edgeHeartbeat: string
  readonly run: (nodeId: string) => string
  readonly cancel: (nodeId: string) => string
  readonly credit: (nodeId: string) => string
  /** All of a node's inbound subjects, so that a RunCancel or RunCredit is never handled before its RunStart. */
  readonly nodeInbox: (nodeId: string) => string
  /**
   * A run's events, per attempt: a node that accepts late (after the edge timed out and offered the run to
   * another node) publishes where nobody listens, never into the next attempt's stream.
   */
  readonly events: (edgeId: string, runId: string, nodeId: string) => string
}

export const subjects = (prefix: string): Subjects => ({
  announce: `${prefix}.nodes.announce`,
  leave: `${prefix}.nodes.leave`,
  edgeHeartbeat: `${prefix}.edges.heartbeat`,
  run: (nodeId) => `${prefix}.node.${nodeId}.run`,
  cancel: (nodeId) => `${prefix}.node.${nodeId}.cancel`,
  credit: (nodeId) => `${prefix}.node.${nodeId}.credit`,
  nodeInbox: (nodeId) => `${prefix}.node.${nodeId}.*`,
  events: (edgeId, runId, nodeId) => `${prefix}.edge.${edgeId}.events.${runId}.${nodeId}`
})

// ---------------------------------------------------------------------------
// Encoding

/** A decoded message, or why it was rejected: a message is used whole or not at all. */
export type Decoded<A> =
  | { readonly _tag: "Ok"; readonly value: A }
  | { readonly _tag: "UnsupportedVersion"; readonly version: unknown }
  | { readonly _tag: "Invalid"; readonly message: string }

const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder("utf-8", { fatal: true })

const parseJson = (bytes: Uint8Array): Either.Either<unknown, string> => {
  try {
    return Either.right(JSON.parse(textDecoder.decode(bytes)))
  } catch (e) {
    return Either.left(e instanceof Error ? e.message : String(e))
  }
}

const versionOf = (json: unknown): unknown =>
  typeof json === "object" && json !== null && "v" in json ? json.v : undefined

/** A decoder for one message schema: JSON, then the version, then the schema. */
export const decoder = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema)
  return (bytes: Uint8Array): Decoded<A> => {
    const json = parseJson(bytes)
    if (Either.isLeft(json)) return { _tag: "Invalid", message: `not JSON: ${json.left}` }
    const version = versionOf(json.right)
    if (version !== PROTOCOL_VERSION) return { _tag: "UnsupportedVersion", version }
    const result = decode(json.right)
    if (Either.isRight(result)) return { _tag: "Ok", value: result.right }
    const issue = primaryIssue(result.left)
    if (issue === undefined) return { _tag: "Invalid", message: "invalid message" }
    return { _tag: "Invalid", message: issue.path === "" ? issue.message : `${issue.path}: ${issue.message}` }
  }
}

/** An encoder for one message schema. Left only for values the schema rejects (a bug on the sending side). */
export const encoder = <A, I>(schema: Schema.Schema<A, I>) => {
  const encode = Schema.encodeEither(schema)
  return (value: A): Either.Either<Uint8Array, string> =>
    Either.match(encode(value), {
      onLeft: (error) => Either.left(primaryIssue(error)?.message ?? "invalid message"),
      onRight: (json) => Either.right(textEncoder.encode(JSON.stringify(json)))
    })
}

export const describeRejection = (d: Exclude<Decoded<unknown>, { _tag: "Ok" }>): string =>
  d._tag === "UnsupportedVersion" ? `unsupported protocol version ${JSON.stringify(d.version) ?? "none"}` : d.message

export const decode = {
  announce: decoder(NodeAnnounce),
  leave: decoder(NodeLeave),
  runStart: decoder(RunStart),
  runReply: decoder(RunReply),
  runCancel: decoder(RunCancel),
  runCredit: decoder(RunCredit),
  edgeHeartbeat: decoder(EdgeHeartbeat)
}

export const encode = {
  announce: encoder(NodeAnnounce),
  leave: encoder(NodeLeave),
  runStart: encoder(RunStart),
  runReply: encoder(RunReply),
  runCancel: encoder(RunCancel),
  runCredit: encoder(RunCredit),
  edgeHeartbeat: encoder(EdgeHeartbeat)
}

// ---------------------------------------------------------------------------
// Sequence check: the messages of a run carry seq 0, 1, 2, … on one subject.

export interface SeqState {
  readonly next: number
}

export type SeqResult =
  | { readonly _tag: "Ok"; readonly state: SeqState }
  | { readonly _tag: "Gap"; readonly expected: number; readonly got: number }
  | { readonly _tag: "Duplicate"; readonly expected: number; readonly got: number }

export const initial = (): SeqState => ({ next: 0 })

/** A gap or a duplicate means the text would be wrong: the caller fails the run instead of guessing. */
export const accept = (state: SeqState, seq: number): SeqResult =>
  seq === state.next
    ? { _tag: "Ok", state: { next: seq + 1 } }
    : seq > state.next
    ? { _tag: "Gap", expected: state.next, got: seq }
    : { _tag: "Duplicate", expected: state.next, got: seq }

export const describeSeqError = (r: Exclude<SeqResult, { _tag: "Ok" }>): string =>
  r._tag === "Gap"
    ? `run stream lost events (expected event ${r.expected}, got ${r.got})`
    : `run stream repeated an event (expected event ${r.expected}, got ${r.got})`

// ---------------------------------------------------------------------------
// Fitting a batch into messages: none may exceed the server's max_payload.

/** Room kept beside the measured envelope, to spare: a message a few bytes over is a lost run. */
const HEADROOM = 256
/** The least room for events in one message, however small the server's limit (no message of a few bytes each). */
const MIN_ROOM = 64

const byteLength = (json: unknown): number => Buffer.byteLength(JSON.stringify(json), "utf8")

/** The encoded size of an event, in bytes (the encoder drops unknown keys, so never more than this). */
export const eventBytes = (event: RunEvent): number => byteLength(event)

/** Bytes a message of `runId` may spend on its events (the JSON array's commas included). */
export const eventRoom = (runId: string, maxPayload: number): number => {
  const envelope = byteLength({
    v: PROTOCOL_VERSION,
    runId,
    seq: Number.MAX_SAFE_INTEGER,
    accepted: true,
    end: true,
    events: []
  })
  return Math.max(MIN_ROOM, maxPayload - envelope - HEADROOM)
}

const isHigh = (c: number) => c >= 0xd800 && c <= 0xdbff
const isLow = (c: number) => c >= 0xdc00 && c <= 0xdfff

/** What one UTF-16 code unit costs inside a JSON string (JSON.stringify's escapes, UTF-8); pairs are counted apart. */
const unitCost = (c: number): number =>
  c < 0x20
    ? (c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d ? 2 : 6)
    : c === 0x22 || c === 0x5c
    ? 2
    : c < 0x80
    ? 1
    : c < 0x800
    ? 2
    : c >= 0xd800 && c <= 0xdfff
    ? 6 // a lone surrogate is written as \uXXXX
    : 3

interface Piece {
  readonly text: string
  /** Its JSON string body's size (quotes excluded), in bytes. */
  readonly bytes: number
}

const cut = (text: string, maxBytes: number): ReadonlyArray<Piece> => {
  const pieces: Array<Piece> = []
  let start = 0
  let bytes = 0
  let i = 0
  while (i < text.length) {
    const c = text.charCodeAt(i)
    const pair = isHigh(c) && i + 1 < text.length && isLow(text.charCodeAt(i + 1))
    const cost = pair ? 4 : unitCost(c)
    if (bytes + cost > maxBytes && i > start) {
      pieces.push({ text: text.slice(start, i), bytes })
      start = i
      bytes = 0
    }
    bytes += cost
    i += pair ? 2 : 1
  }
  pieces.push({ text: text.slice(start), bytes })
  return pieces
}

/**
 * Cuts `text` into pieces whose JSON string bodies (quotes excluded) take at
 * most `maxBytes`, never between the two halves of a surrogate pair. Joined,
 * the pieces are `text`. A piece holds at least one character.
 */
export const splitText = (text: string, maxBytes: number): ReadonlyArray<string> =>
  cut(text, maxBytes).map((p) => p.text)

const isText = (event: RunEvent): event is RunEvent & { readonly _tag: "Delta" | "ReasoningDelta" } =>
  event._tag === "Delta" || event._tag === "ReasoningDelta"

/**
 * False when `events` certainly take more than `maxPayload` bytes in one
 * message (their text alone has more code units than that: each costs at
 * least a byte), so the sender goes straight to `fitBatch`.
 */
export const mayFit = (events: ReadonlyArray<RunEvent>, maxPayload: number): boolean => {
  let chars = 0
  for (const e of events) if (isText(e)) chars += e.text.length
  return chars <= maxPayload
}

const truncated = (message: string, room: number): string => {
  const marker = " (truncated)"
  return `${splitText(message, Math.max(1, room - marker.length))[0] ?? ""}${marker}`
}

/** An entry that fits a message of its own: else without its alternatives and bytes, else without its token. */
const fittedEntry = (entry: TokenLogprob, room: number): TokenLogprob => {
  if (byteLength(entry) <= room) return entry
  const chars = entry.chars ?? entry.token.length
  const bare: TokenLogprob = { token: entry.token, logprob: entry.logprob, ...(entry.chars !== undefined ? { chars } : {}) }
  // `chars` keeps the entries after it where they belong (the edge lays them end to end over the text).
  return byteLength(bare) <= room ? bare : { token: "", logprob: entry.logprob, chars }
}

/**
 * A Delta's logprob entries as empty-text Deltas that fit, to go before its text: the edge places entries by
 * their offsets in the run's text, not by the event that carried them.
 */
const fitLogprobs = (entries: ReadonlyArray<TokenLogprob>, room: number): ReadonlyArray<readonly [RunEvent, number]> => {
  const overhead = byteLength({ _tag: "Delta", text: "", logprobs: [] })
  const out: Array<readonly [RunEvent, number]> = []
  let current: Array<TokenLogprob> = []
  let used = overhead
  for (const entry of entries) {
    const fitted = fittedEntry(entry, room - overhead)
    const size = byteLength(fitted)
    if (current.length > 0 && used + 1 + size > room) {
      out.push([{ _tag: "Delta", text: "", logprobs: current }, used])
      current = []
      used = overhead
    }
    used += (current.length === 0 ? 0 : 1) + size
    current.push(fitted)
  }
  if (current.length > 0) out.push([{ _tag: "Delta", text: "", logprobs: current }, used])
  return out
}

/**
 * An event too big for one message, as events that fit (with their sizes):
 * text cut (its logprob entries sent ahead of it), an error message shortened, a Complete refused.
 */
const fitEvent = (
  event: RunEvent,
  room: number,
  maxPayload: number
): ReadonlyArray<readonly [RunEvent, number]> => {
  switch (event._tag) {
    case "Delta":
    case "ReasoningDelta": {
      const tag = event._tag
      const overhead = byteLength({ _tag: tag, text: "" })
      const pieces = cut(event.text, room - overhead).map((p) => [{ _tag: tag, text: p.text }, overhead + p.bytes] as const)
      return event._tag === "Delta" && event.logprobs !== undefined && event.logprobs.length > 0
        ? [...fitLogprobs(event.logprobs, room), ...pieces]
        : pieces
    }
    case "Failed":
    case "Cancelled": {
      const overhead = byteLength({ _tag: event._tag, message: "" })
      const fitted = { _tag: event._tag, message: truncated(event.message, room - overhead) }
      return [[fitted, eventBytes(fitted)]]
    }
    case "Complete": {
      const failed: RunEvent = {
        _tag: "Failed",
        message: `the run's result (${eventBytes(event)} bytes, tool-call arguments included) is larger than the ` +
          `message bus carries in one message (NATS max_payload ${maxPayload} bytes)`
      }
      return [[failed, eventBytes(failed)]]
    }
  }
}

/**
 * A batch as the messages that carry it, in order, each within `maxPayload`
 * once enveloped for `runId`: events are packed as they come, an oversize
 * Delta/ReasoningDelta becomes several of the same kind (readers concatenate
 * them), an oversize Failed/Cancelled is shortened, and an oversize Complete
 * (which cannot be cut) becomes a Failed that says why.
 */
export const fitBatch = (
  runId: string,
  events: ReadonlyArray<RunEvent>,
  maxPayload: number
): ReadonlyArray<ReadonlyArray<RunEvent>> => {
  const room = eventRoom(runId, maxPayload)
  const messages: Array<Array<RunEvent>> = []
  let current: Array<RunEvent> = []
  let used = 0
  const add = (event: RunEvent, bytes: number) => {
    if (current.length > 0 && used + 1 + bytes > room) {
      messages.push(current)
      current = []
      used = 0
    }
    used += current.length === 0 ? bytes : 1 + bytes
    current.push(event)
  }
  for (const event of events) {
    // Text longer than the room is over for sure (a code unit costs a byte at least): cut it, not measured whole.
    const bytes = isText(event) && event.text.length > room ? Number.POSITIVE_INFINITY : eventBytes(event)
    if (bytes <= room) add(event, bytes)
    else for (const [piece, size] of fitEvent(event, room, maxPayload)) add(piece, size)
  }
  if (current.length > 0) messages.push(current)
  return messages
}
