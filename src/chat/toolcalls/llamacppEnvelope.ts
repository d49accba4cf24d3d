/**
 * llama.cpp's generic tool-call envelope, for models without a format of their own: the whole response is
 * `{"tool_call": {"name": ..., "arguments": {...}}}` or `{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}`.
 * Marker-less, so a call only when it is the whole response and every call names a request tool; anything else
 * (the envelope's `{"response": "..."}` included) is text.
 */
import { type BareFormat, isWhitespace } from "./block.js"
import { argumentsText, findTool, isRecord, parseJson } from "./json.js"
import { JSON_OPENED, jsonClosed, jsonStep } from "./jsonScan.js"
import type { ParsedToolCall, RequestTool } from "./types.js"

const KEY = "tool_call"

// Scan states, after the envelope's `{`: before its key; KEY_CHARS + k: k chars of `tool_call` read after the
// key's quote; after `tool_calls`' s; before the colon; before the value; no envelope; IN_JSON + s: in the value,
// jsonScan state s counting the envelope's own brace.
const LEAD = 0
const KEY_CHARS = 1
const KEY_S = KEY_CHARS + KEY.length + 1
const COLON = KEY_S + 1
const VALUE = COLON + 1
const DEAD = VALUE + 1
const IN_JSON = 16

const keyStep = (s: number, c: number): number => {
  const k = s - KEY_CHARS
  if (k < KEY.length) return c === KEY.charCodeAt(k) ? s + 1 : DEAD
  if (c === 0x22) return COLON
  return c === 0x73 ? KEY_S : DEAD
}

const step = (s: number, c: number): number => {
  if (s >= IN_JSON) {
    const inner = s - IN_JSON
    if (!jsonClosed(inner)) return IN_JSON + jsonStep(inner, c)
    return isWhitespace(c) ? s : DEAD
  }
  switch (s) {
    case LEAD:
      if (isWhitespace(c)) return LEAD
      return c === 0x22 ? KEY_CHARS : DEAD
    case KEY_S:
      return c === 0x22 ? COLON : DEAD
    case COLON:
      if (isWhitespace(c)) return COLON
      return c === 0x3a ? VALUE : DEAD
    case VALUE:
      if (isWhitespace(c)) return VALUE
      return c === 0x7b || c === 0x5b ? IN_JSON + jsonStep(JSON_OPENED, c) : DEAD
    case DEAD:
      return DEAD
    default:
      return keyStep(s, c)
  }
}

const envelopeCall = (value: unknown, tools: ReadonlyArray<RequestTool>): ParsedToolCall | undefined => {
  if (!isRecord(value)) return undefined
  const name = value["name"]
  const tool = typeof name === "string" ? findTool(tools, name.trim()) : undefined
  const args = argumentsText("arguments" in value ? value["arguments"] : value["parameters"])
  return tool === undefined || args === undefined ? undefined : { name: tool.name, arguments: args }
}

const parse = (text: string, tools: ReadonlyArray<RequestTool>): ReadonlyArray<ParsedToolCall> | undefined => {
  const parsed = parseJson(text.trim())
  if (!parsed.ok || !isRecord(parsed.value)) return undefined
  const envelope = parsed.value
  const keys = Object.keys(envelope)
  if (keys.length !== 1) return undefined
  const one = envelope["tool_call"]
  const many = envelope["tool_calls"]
  const list = isRecord(one) ? [one] : Array.isArray(many) ? many : []
  if (list.length === 0) return undefined
  const out: Array<ParsedToolCall> = []
  for (const item of list) {
    const call = envelopeCall(item, tools)
    if (call === undefined) return undefined
    out.push(call)
  }
  return out
}

export const llamacppEnvelope: BareFormat = {
  format: "llamacpp_envelope",
  first: 0x7b,
  start: LEAD,
  step,
  done: (s) => s >= IN_JSON && jsonClosed(s - IN_JSON),
  dead: (s) => s === DEAD,
  parse
}
