/**
 * gpt-oss "harmony" output as a streaming filter. A harmony response is a list of messages,
 * `[<|start|>{role header}]<|channel|>{channel header}<|message|>{body}<|end|>` (the first one's `<|start|>assistant`
 * is in the prompt), ended by `<|return|>` (done) or `<|call|>` (a tool call). The `analysis` channel is reasoning,
 * any other channel is content (`final`, a `commentary` preamble), and a message with recipient
 * `to=functions.NAME` (in the role or the channel part of the header) is a call whose JSON body is the arguments.
 *
 * The filter engages only when the response (after leading whitespace) starts with `<|channel|>` or `<|start|>`;
 * otherwise everything is Content, untouched. Engaged, no harmony marker reaches Content or Reasoning: bodies stream
 * on, holding back only a possible partial marker, and a call's body is held until its message ends.
 *
 * Choices the format leaves open:
 * - A recipient outside `functions.` (the built-in `browser.*`, `python`) is Malformed: the gateway offers no
 *   built-in tools, and the model stops after such a call waiting for a result nobody will send.
 * - A message whose role is not `assistant` (a tool reply or a user turn the model went on to invent) ends the
 *   response: it and everything after it are dropped. `<|return|>` ends it too; `<|call|>` and `<|end|>` do not,
 *   so a server that does not stop at `<|call|>` still gives every call.
 * - A missing `<|end|>` before `<|start|>` or `<|channel|>` ends the message there; a stray `<|message|>` or
 *   `<|constrain|>` in a body is dropped; text between messages (whitespace aside) is content.
 * Markers match in any ASCII case. Linear: each char is looked at a bounded number of times (held partial markers
 * are shorter than the longest marker; a header is capped).
 */
import { clip } from "../../common/clip.js"
import { isWhitespace, lowerCode } from "../toolcalls/block.js"
import { argumentsText, parseJson, REASON_PART_CHARS } from "../toolcalls/json.js"
import type { ParsedToolCall } from "../toolcalls/types.js"

export type HarmonyOutput =
  | { readonly _tag: "Content"; readonly text: string }
  | { readonly _tag: "Reasoning"; readonly text: string }
  | { readonly _tag: "Call"; readonly call: ParsedToolCall }
  | { readonly _tag: "Malformed"; readonly reason: string }

/** Where a message body goes. */
type Route =
  | { readonly _tag: "Content" }
  | { readonly _tag: "Reasoning" }
  | { readonly _tag: "Call"; readonly name: string; readonly body: string }
  /** A message to a recipient that is not a function: reported once, its body dropped. */
  | { readonly _tag: "Drop" }

export type HarmonyState =
  /** Not yet known whether this is harmony: `held` is all input so far, `probe` the marker part of it. */
  | { readonly _tag: "Leading"; readonly held: string; readonly probe: string }
  /** Not harmony: text is Content. */
  | { readonly _tag: "Passing" }
  /** In a message header; `fromStart`: it began with `<|start|>` (so it names a role). */
  | { readonly _tag: "Header"; readonly fromStart: boolean; readonly header: string; readonly held: string }
  /** In a message body; `held` may be the start of a marker. */
  | { readonly _tag: "Body"; readonly route: Route; readonly held: string }
  /** After `<|end|>` or `<|call|>`: whitespace is dropped until the next message. */
  | { readonly _tag: "Between"; readonly held: string }
  /** `<|return|>` or a message not from the assistant: the rest of the stream is dropped. */
  | { readonly _tag: "Ended" }

const START = "<|start|>"
const END = "<|end|>"
const MESSAGE = "<|message|>"
const CHANNEL = "<|channel|>"
const CONSTRAIN = "<|constrain|>"
const RETURN = "<|return|>"
const CALL = "<|call|>"
/** Every harmony marker, in lower case. */
export const HARMONY_MARKERS: ReadonlyArray<string> = [START, END, MESSAGE, CHANNEL, CONSTRAIN, RETURN, CALL]

const WHERE = "harmony"
/** A header longer than this is not a header (a role, a channel, a recipient and a content type are short). */
export const MAX_HEADER_CHARS = 1024
const FUNCTIONS = "functions."

export const initial: HarmonyState = { _tag: "Leading", held: "", probe: "" }
const PASSING: HarmonyState = { _tag: "Passing" }
const ENDED: HarmonyState = { _tag: "Ended" }
const BETWEEN: HarmonyState = { _tag: "Between", held: "" }
const CONTENT: Route = { _tag: "Content" }
const REASONING: Route = { _tag: "Reasoning" }
const DROP: Route = { _tag: "Drop" }

/** How many chars of `marker` (lower case) match `text` from `at` on, stopping at a mismatch or the end of `text`. */
const matchLength = (text: string, at: number, marker: string): number => {
  let k = 0
  while (k < marker.length && at + k < text.length && lowerCode(text.charCodeAt(at + k)) === marker.charCodeAt(k)) k++
  return k
}

/** `marker`: the marker found at `at`; "" when `text` ends in a partial marker from `at` (or has none: `at` = end). */
interface Found {
  readonly at: number
  readonly marker: string
}

/** The first marker in `text` from `from` on, or where a partial one ends the text. */
const findMarker = (text: string, from: number): Found => {
  let at = text.indexOf("<", from)
  while (at >= 0) {
    let partial = false
    for (const marker of HARMONY_MARKERS) {
      const k = matchLength(text, at, marker)
      if (k === marker.length) return { at, marker }
      if (at + k === text.length) partial = true
    }
    // Every marker starts with `<`: nothing after a partial one that runs to the end can start another.
    if (partial) return { at, marker: "" }
    at = text.indexOf("<", at + 1)
  }
  return { at: text.length, marker: "" }
}

/**
 * Pushes text. Pieces are never joined: each is text between two markers, so none holds a marker, while two pieces
 * around a dropped marker might spell one if joined.
 */
const emit = (out: Array<HarmonyOutput>, tag: "Content" | "Reasoning", text: string): void => {
  if (text !== "") out.push({ _tag: tag, text })
}

const malformedOut = (out: Array<HarmonyOutput>, reason: string): void => {
  out.push({ _tag: "Malformed", reason: `${WHERE}: ${reason}` })
}

const shown = (text: string): string => clip(text, REASON_PART_CHARS)

interface Header {
  readonly role: string
  readonly channel: string
  readonly recipient: string | undefined
}

const words = (text: string): ReadonlyArray<string> => text.split(/\s+/).filter((w) => w !== "")

const isRecipient = (word: string): boolean => word.length > 3 && word.slice(0, 3).toLowerCase() === "to="

/** `role to=R<|channel|>channel to=R ctype<|constrain|>ctype`, the markers written in lower case by `header`. */
const parseHeader = (fromStart: boolean, header: string): Header => {
  const channelAt = fromStart ? header.indexOf(CHANNEL) : 0
  const rolePart = fromStart ? header.slice(0, channelAt < 0 ? header.length : channelAt) : ""
  const rest = channelAt < 0 ? "" : header.slice(fromStart ? channelAt + CHANNEL.length : 0)
  const constrainAt = rest.indexOf(CONSTRAIN)
  const roleWords = words(rolePart)
  const channelWords = words(constrainAt < 0 ? rest : rest.slice(0, constrainAt))
  const recipient = [...roleWords, ...channelWords].find(isRecipient)
  return {
    role: (roleWords.find((w) => !isRecipient(w)) ?? "assistant").toLowerCase(),
    channel: (channelWords.find((w) => !isRecipient(w)) ?? "").toLowerCase(),
    recipient: recipient?.slice(3)
  }
}

/** The route of a message with this header, or undefined when it is not the assistant's (the response ended). */
const routeOf = (header: Header, out: Array<HarmonyOutput>): Route | undefined => {
  if (header.role !== "assistant") return undefined
  const recipient = header.recipient
  if (recipient === undefined) return header.channel === "analysis" ? REASONING : CONTENT
  if (recipient.slice(0, FUNCTIONS.length).toLowerCase() !== FUNCTIONS) {
    malformedOut(out, `message to ${shown(recipient)}, which is not a function (no built-in tools are offered)`)
    return DROP
  }
  const name = recipient.slice(FUNCTIONS.length)
  if (name !== "") return { _tag: "Call", name, body: "" }
  malformedOut(out, "call without a function name")
  return DROP
}

/** A call's body as arguments. `closed`: its message ended with a marker, not with the stream. */
const finishCall = (name: string, body: string, closed: boolean, out: Array<HarmonyOutput>): void => {
  const text = body.trim()
  if (text === "" && closed) {
    out.push({ _tag: "Call", call: { name, arguments: "{}" } })
    return
  }
  const parsed = parseJson(text)
  if (!parsed.ok) {
    const why = closed ? `invalid JSON (${clip(parsed.error, REASON_PART_CHARS * 2)})` : "cut off before its JSON ended"
    malformedOut(out, `arguments of functions.${shown(name)}: ${why}`)
    return
  }
  const args = argumentsText(parsed.value)
  if (args === undefined) malformedOut(out, `arguments of functions.${shown(name)} are not a JSON object`)
  else out.push({ _tag: "Call", call: { name, arguments: args } })
}

/** A header that ended (with a marker or the stream) before `<|message|>`: only a call is worth a word. */
const cutHeader = (fromStart: boolean, header: string, out: Array<HarmonyOutput>): void => {
  const parsed = parseHeader(fromStart, header)
  const recipient = parsed.recipient
  if (parsed.role === "assistant" && recipient !== undefined && recipient.toLowerCase().startsWith(FUNCTIONS)) {
    malformedOut(out, `call to ${shown(recipient)} has no <|message|>`)
  }
}

/** The state a marker that ends a message leads to, or undefined for a marker that does not end one. */
const afterMessage = (marker: string): HarmonyState | undefined => {
  switch (marker) {
    case START:
      return { _tag: "Header", fromStart: true, header: "", held: "" }
    case CHANNEL:
      return { _tag: "Header", fromStart: false, header: "", held: "" }
    case END:
    case CALL:
      return BETWEEN
    case RETURN:
      return ENDED
    default:
      return undefined
  }
}

/** One step: consumes `text` from `from` in `state`; `at` is where to go on, or -1 when all was consumed. */
type Step = readonly [HarmonyState, number]

type In<T extends HarmonyState["_tag"]> = Extract<HarmonyState, { _tag: T }>

const inHeader = (s: In<"Header">, text: string, from: number, out: Array<HarmonyOutput>): Step => {
  const found = findMarker(text, from)
  const header = s.header + text.slice(from, found.at)
  if (header.length > MAX_HEADER_CHARS) {
    malformedOut(out, `message header longer than ${MAX_HEADER_CHARS} chars`)
    return [ENDED, -1]
  }
  const next = found.at + found.marker.length
  if (found.marker === "") return [{ ...s, header, held: text.slice(found.at) }, -1]
  if (found.marker === CHANNEL || found.marker === CONSTRAIN) {
    return [{ ...s, header: header + found.marker, held: "" }, next]
  }
  if (found.marker === MESSAGE) {
    const route = routeOf(parseHeader(s.fromStart, header), out)
    return route === undefined ? [ENDED, -1] : [{ _tag: "Body", route, held: "" }, next]
  }
  cutHeader(s.fromStart, header, out)
  return [afterMessage(found.marker) ?? ENDED, next]
}

const bodyText = (route: Route, text: string, out: Array<HarmonyOutput>): Route => {
  if (route._tag === "Content" || route._tag === "Reasoning") emit(out, route._tag, text)
  return route._tag === "Call" && text !== "" ? { ...route, body: route.body + text } : route
}

const inBody = (s: In<"Body">, text: string, from: number, out: Array<HarmonyOutput>): Step => {
  const found = findMarker(text, from)
  const route = bodyText(s.route, text.slice(from, found.at), out)
  if (found.marker === "") return [{ _tag: "Body", route, held: text.slice(found.at) }, -1]
  const next = found.at + found.marker.length
  const after = afterMessage(found.marker)
  // A stray `<|message|>` or `<|constrain|>` inside a body: the marker is dropped, the body goes on.
  if (after === undefined) return [{ _tag: "Body", route, held: "" }, next]
  if (route._tag === "Call") finishCall(route.name, route.body, true, out)
  return [after, next]
}

const between = (text: string, from: number): Step => {
  let i = from
  while (i < text.length && isWhitespace(text.charCodeAt(i))) i++
  if (i === text.length) return [BETWEEN, -1]
  const found = findMarker(text, i)
  // Text that is not a message: shown as it is, up to the next marker.
  if (found.at > i) return [{ _tag: "Body", route: CONTENT, held: "" }, i]
  if (found.marker === "") return [{ _tag: "Between", held: text.slice(i) }, -1]
  return [afterMessage(found.marker) ?? BETWEEN, i + found.marker.length]
}

/** Runs `text` (held chars of `state` first) through the harmony states. */
const consume = (state: HarmonyState, text: string, out: Array<HarmonyOutput>): HarmonyState => {
  let s = state
  let at = 0
  // Each step reads on from `at` or (Between → Body) changes state without reading: the loop ends.
  while (at >= 0) {
    let step: Step
    switch (s._tag) {
      case "Header":
        step = inHeader(s, text, at, out)
        break
      case "Body":
        step = inBody(s, text, at, out)
        break
      case "Between":
        step = between(text, at)
        break
      case "Leading":
      case "Passing":
      case "Ended":
        return s
    }
    s = step[0]
    at = step[1]
  }
  return s
}

const leading = (s: In<"Leading">, chunk: string, out: Array<HarmonyOutput>): HarmonyState => {
  let i = 0
  if (s.probe === "") while (i < chunk.length && isWhitespace(chunk.charCodeAt(i))) i++
  const held = s.held + chunk
  if (i === chunk.length && s.probe === "") return { _tag: "Leading", held, probe: "" }
  const probe = s.probe + chunk.slice(i)
  for (const marker of [CHANNEL, START]) {
    const k = matchLength(probe, 0, marker)
    if (k === marker.length) {
      // Harmony: the leading whitespace and the marker are dropped.
      const header: HarmonyState = { _tag: "Header", fromStart: marker === START, header: "", held: "" }
      return consume(header, probe.slice(k), out)
    }
  }
  if (matchLength(probe, 0, CHANNEL) === probe.length || matchLength(probe, 0, START) === probe.length) {
    return { _tag: "Leading", held, probe }
  }
  emit(out, "Content", held)
  return PASSING
}

export const append = (state: HarmonyState, chunk: string): readonly [HarmonyState, ReadonlyArray<HarmonyOutput>] => {
  if (chunk === "") return [state, []]
  const out: Array<HarmonyOutput> = []
  switch (state._tag) {
    case "Leading":
      return [leading(state, chunk, out), out]
    case "Passing":
      return [state, [{ _tag: "Content", text: chunk }]]
    case "Ended":
      return [state, out]
    case "Header":
    case "Body":
    case "Between":
      // The held text is shorter than the longest marker, so it is read again a bounded number of times.
      return [consume(state, state.held + chunk, out), out]
  }
}

/** The stream ended: held text goes where it was heading; a call gives its arguments only if its JSON is whole. */
export const flush = (state: HarmonyState): ReadonlyArray<HarmonyOutput> => {
  const out: Array<HarmonyOutput> = []
  switch (state._tag) {
    case "Leading":
      emit(out, "Content", state.held)
      break
    case "Header":
      cutHeader(state.fromStart, state.header, out)
      break
    case "Body": {
      const route = bodyText(state.route, state.held, out)
      if (route._tag === "Call") finishCall(route.name, route.body, false, out)
      break
    }
    case "Between":
      emit(out, "Content", state.held)
      break
    case "Passing":
    case "Ended":
      break
  }
  return out
}

/** The response is harmony (decided once its start was seen): its end tokens were consumed here. */
export const engaged = (state: HarmonyState): boolean => state._tag !== "Leading" && state._tag !== "Passing"

/** How many chars of input are held undecided at the end of the input so far (a call's body aside). */
export const heldChars = (state: HarmonyState): number =>
  state._tag === "Leading" || state._tag === "Header" || state._tag === "Body" || state._tag === "Between"
    ? state.held.length
    : 0
