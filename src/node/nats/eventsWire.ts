import type { RunEvent } from "../../protocol/RunEvent.js"
import { RunId } from "../../protocol/RunEvent.js"
import type { Decoded, RunEventsMsg } from "./protocol.js"
import { PROTOCOL_VERSION } from "./protocol.js"

/**
 * The run-events message on the hot path: one per provider read, so read with `JSON.parse` and plain field
 * guards and written with `JSON.stringify`, not with Schema (`RunEventsMsg` in protocol.ts stays the
 * definition; a property test holds the two to the same answers). A message is used whole or not at all.
 */

const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder("utf-8", { fatal: true })

type Json = Readonly<Record<string, unknown>>

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const isString = (u: unknown): u is string => typeof u === "string"
const isNumber = (u: unknown): u is number => typeof u === "number" && !Number.isNaN(u)
const optional = (u: unknown, guard: (v: unknown) => boolean): boolean => u === undefined || guard(u)

const isToolCall = (u: unknown): boolean =>
  isObject(u) && optional(u["id"], isString) && isString(u["name"]) && isString(u["arguments"])

const isUsage = (u: unknown): boolean =>
  isObject(u) && isNumber(u["inputTokens"]) && isNumber(u["outputTokens"]) &&
  optional(u["reasoningTokens"], isNumber) && optional(u["cachedInputTokens"], isNumber)

const isNumberArray = (u: unknown): boolean => Array.isArray(u) && u.every(isNumber)

const isTopLogprob = (u: unknown): boolean =>
  isObject(u) && isString(u["token"]) && isNumber(u["logprob"]) && optional(u["bytes"], isNumberArray)

const isTokenLogprob = (u: unknown): boolean =>
  isTopLogprob(u) && isObject(u) &&
  optional(u["topLogprobs"], (v) => Array.isArray(v) && v.every(isTopLogprob)) && optional(u["chars"], isNumber)

const isStringRecord = (u: unknown): boolean => isObject(u) && Object.values(u).every(isString)

const isUpstreamAnswer = (u: unknown): boolean =>
  isObject(u) && isNumber(u["status"]) && isString(u["message"]) && optional(u["code"], isString) &&
  optional(u["retryAfter"], isNumber)

const isTransportFault = (u: unknown): boolean => u === "unreachable" || u === "broken"

/** Why `u` is not a run event, or undefined when it is one. */
const eventProblem = (u: unknown): string | undefined => {
  if (!isObject(u)) return ": expected an object"
  switch (u["_tag"]) {
    case "Delta":
      if (!isString(u["text"])) return "text: expected a string"
      return optional(u["logprobs"], (v) => Array.isArray(v) && v.every(isTokenLogprob))
        ? undefined
        : "logprobs: expected token log probabilities"
    case "ReasoningDelta":
      return isString(u["text"]) ? undefined : "text: expected a string"
    case "Complete":
      if (!isString(u["finishReason"])) return "finishReason: expected a string"
      if (!Array.isArray(u["toolCalls"]) || !u["toolCalls"].every(isToolCall)) return "toolCalls: expected tool calls"
      if (!optional(u["usage"], isUsage)) return "usage: expected token counts"
      return isStringRecord(u["metadata"]) ? undefined : "metadata: expected a string map"
    case "Failed":
      if (!isString(u["message"])) return "message: expected a string"
      if (!optional(u["transport"], isTransportFault)) return "transport: expected unreachable or broken"
      return optional(u["upstream"], isUpstreamAnswer) ? undefined : "upstream: expected an upstream answer"
    case "Cancelled":
      return isString(u["message"]) ? undefined : "message: expected a string"
    default:
      return "_tag: expected a run event"
  }
}

const isRunEvent = (u: unknown): u is RunEvent => eventProblem(u) === undefined

/**
 * A `Complete` whose metadata has a `__proto__` key loses it, as the schema's record decoding does (its
 * assignment creates no key): both decoders give the same event, and no later copy by assignment can set a
 * prototype from it.
 */
const withoutProtoKey = (e: RunEvent): RunEvent => {
  if (e._tag !== "Complete" || !Object.hasOwn(e.metadata, "__proto__")) return e
  const metadata: Record<string, string> = {}
  for (const [key, value] of Object.entries(e.metadata)) if (key !== "__proto__") metadata[key] = value
  return { ...e, metadata }
}

export const decodeRunEvents = (bytes: Uint8Array): Decoded<RunEventsMsg> => {
  let json: unknown
  try {
    json = JSON.parse(textDecoder.decode(bytes))
  } catch (e) {
    return { _tag: "Invalid", message: `not JSON: ${e instanceof Error ? e.message : String(e)}` }
  }
  if (!isObject(json)) return { _tag: "UnsupportedVersion", version: undefined }
  if (json["v"] !== PROTOCOL_VERSION) return { _tag: "UnsupportedVersion", version: json["v"] }
  const runId = json["runId"]
  if (!isString(runId)) return { _tag: "Invalid", message: "runId: expected a string" }
  const seq = json["seq"]
  if (typeof seq !== "number" || !Number.isInteger(seq) || seq < 0) {
    return { _tag: "Invalid", message: "seq: expected a non-negative integer" }
  }
  const accepted = json["accepted"]
  if (accepted !== undefined && typeof accepted !== "boolean") {
    return { _tag: "Invalid", message: "accepted: expected a boolean" }
  }
  const whole = json["whole"]
  if (whole !== undefined && typeof whole !== "boolean") return { _tag: "Invalid", message: "whole: expected a boolean" }
  const progress = json["progress"]
  if (progress !== undefined && typeof progress !== "boolean") {
    return { _tag: "Invalid", message: "progress: expected a boolean" }
  }
  const end = json["end"]
  if (end !== undefined && typeof end !== "boolean") return { _tag: "Invalid", message: "end: expected a boolean" }
  const events = json["events"]
  if (!Array.isArray(events)) return { _tag: "Invalid", message: "events: expected an array" }
  const checked: Array<RunEvent> = []
  for (let i = 0; i < events.length; i++) {
    const e: unknown = events[i]
    if (isRunEvent(e)) checked.push(withoutProtoKey(e))
    else {
      const problem = eventProblem(e) ?? ": invalid"
      return { _tag: "Invalid", message: `events[${i}]${problem.startsWith(":") ? "" : "."}${problem}` }
    }
  }
  const value: RunEventsMsg = { v: PROTOCOL_VERSION, runId: RunId.make(runId), seq, events: checked }
  if (accepted === undefined && whole === undefined && progress === undefined && end === undefined) {
    return { _tag: "Ok", value }
  }
  return {
    _tag: "Ok",
    value: {
      ...value,
      ...(accepted !== undefined ? { accepted } : {}),
      ...(whole !== undefined ? { whole } : {}),
      ...(progress !== undefined ? { progress } : {}),
      ...(end !== undefined ? { end } : {})
    }
  }
}

/** The message's bytes; events are the edge's own plain values, so their JSON is their wire form. */
export const encodeRunEvents = (msg: RunEventsMsg): Uint8Array => textEncoder.encode(JSON.stringify(msg))
