import { clip } from "../../common/clip.js"
import * as RunEvent from "../../protocol/RunEvent.js"
import * as Mapper from "./toRunEvents.js"
import { decodeChunk } from "./upstreamWire.js"

/**
 * A whole upstream answer (`chat.completion`, asked for with `stream: false`) → the run's events, the same ones its
 * stream would have given: the completion is read as one chunk whose `choices[].message` is the delta, then ended
 * as `[DONE]` would end it. Reasoning, content (with its logprobs laid over the whole text), native tool calls,
 * usage, finish reason, the model and an error body in a 200 all go through the stream's own mapper. Pure.
 */

const MAX_QUOTED = 200

type Json = Record<string, unknown>

const isRecord = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const NOT_JSON: unique symbol = Symbol("NotJson")

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return NOT_JSON
  }
}

// A message's tool calls carry no `index` (each is whole): their position is their index, so that two calls
// without ids are not read as pieces of one.
const indexedCalls = (calls: unknown): unknown =>
  Array.isArray(calls) ? calls.map((call, index) => (isRecord(call) && call["index"] === undefined ? { ...call, index } : call)) : calls

const asDelta = (message: unknown): unknown =>
  isRecord(message) && Array.isArray(message["tool_calls"])
    ? { ...message, tool_calls: indexedCalls(message["tool_calls"]) }
    : message

/** The completion as a chunk: each choice's `message` read as its `delta` (a choice that has one keeps it). */
const asChunk = (json: Json): Json => {
  const choices = json["choices"]
  if (!Array.isArray(choices)) return json
  return {
    ...json,
    choices: choices.map((choice: unknown) => {
      if (!isRecord(choice) || choice["message"] === undefined) return choice
      const { message, ...rest } = choice
      return { ...rest, delta: asDelta(message) }
    })
  }
}

/** The run's events for a whole answer's body, its terminal event last. */
export const fromCompletion = (state: Mapper.MapperState, body: string): ReadonlyArray<RunEvent.RunEvent> => {
  const text = body.trim()
  const json = parseJson(text)
  if (json === NOT_JSON) {
    return [RunEvent.failed(`upstream sent an answer that is not JSON: ${clip(text, MAX_QUOTED)}`)]
  }
  if (!isRecord(json)) return [RunEvent.failed("upstream sent a malformed answer (expected an object)")]
  const chunk = decodeChunk(asChunk(json))
  if (typeof chunk === "string") {
    return [RunEvent.failed(`upstream sent a malformed answer (${clip(chunk.replace(/\bdelta\b/, "message"), MAX_QUOTED)})`)]
  }
  const [next, events] = Mapper.feed(state, { _tag: "Chunk", chunk })
  const last = events[events.length - 1]
  if (last !== undefined && RunEvent.isTerminal(last)) return events
  return [...events, Mapper.finish(next)]
}
