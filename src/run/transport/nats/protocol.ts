import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { ModelConfig } from "../../../config/EdgeConfig.js"
import { primaryIssue } from "../../../config/parseIssues.js"
import { NodeId, RunEvent, RunId } from "../../RunEvent.js"
import { SubmitRunRequest } from "../../SubmitRunRequest.js"
import { SubjectToken } from "./BusConfig.js"

/**
 * The edge↔node wire over NATS: versioned JSON messages, their subjects, and
 * the per-run sequence check. Pure: no Effect runtime, no client.
 */

export const PROTOCOL_VERSION = 1

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
  models: Schema.Array(ModelConfig),
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
  eventsSubject: Schema.String
})
export type RunStart = typeof RunStart.Type

export const RunAccepted = Schema.TaggedStruct("RunAccepted", { v: V })
export const RunRefused = Schema.TaggedStruct("RunRefused", { v: V, reason: Schema.String })
/** The node's reply to a RunStart. */
export const RunReply = Schema.Union(RunAccepted, RunRefused)
export type RunReply = typeof RunReply.Type

export const RunEventMsg = Schema.Struct({ v: V, runId: RunId, seq: Count, event: RunEvent })
export type RunEventMsg = typeof RunEventMsg.Type

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
  /** Both of a node's inbound subjects, so that a RunCancel is never handled before its RunStart. */
  readonly nodeInbox: (nodeId: string) => string
  readonly events: (edgeId: string, runId: string) => string
}

export const subjects = (prefix: string): Subjects => ({
  announce: `${prefix}.nodes.announce`,
  leave: `${prefix}.nodes.leave`,
  edgeHeartbeat: `${prefix}.edges.heartbeat`,
  run: (nodeId) => `${prefix}.node.${nodeId}.run`,
  cancel: (nodeId) => `${prefix}.node.${nodeId}.cancel`,
  nodeInbox: (nodeId) => `${prefix}.node.${nodeId}.*`,
  events: (edgeId, runId) => `${prefix}.edge.${edgeId}.events.${runId}`
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
  runEvent: decoder(RunEventMsg),
  runCancel: decoder(RunCancel),
  edgeHeartbeat: decoder(EdgeHeartbeat)
}

export const encode = {
  announce: encoder(NodeAnnounce),
  leave: encoder(NodeLeave),
  runStart: encoder(RunStart),
  runReply: encoder(RunReply),
  runEvent: encoder(RunEventMsg),
  runCancel: encoder(RunCancel),
  edgeHeartbeat: encoder(EdgeHeartbeat)
}

/** A model as a node announces it: everything the edge's chat plane needs, without upstream secrets. */
export const publicModel = (model: ModelConfig): ModelConfig => {
  const p = model.provider
  if (p.type !== "openai") return model
  const provider = { type: "openai" as const, baseUrl: p.baseUrl, ...(p.model !== undefined ? { model: p.model } : {}) }
  return { ...model, provider }
}

// ---------------------------------------------------------------------------
// Sequence check: events of a run carry seq 0, 1, 2, … on one subject.

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
