/**
 * Kimi K3 ("XTML"): `<|open|>tools<|sep|>` holding `<|open|>call tool="NAME" index="1"<|sep|>` elements, each with
 * `<|open|>argument key="KEY" type="string|number|boolean|null|object|array"<|sep|>VALUE<|close|>argument<|sep|>`
 * per argument (or the whole arguments as `<|open|>json type="object"<|sep|>{…}<|close|>json<|sep|>`), closed by
 * `<|close|>call<|sep|>` and `<|close|>tools<|sep|>`. Attribute values escape `&` and `"`; a value is written as it
 * is when it is a string and as JSON otherwise, its `type` attribute saying which.
 */
import type { TagFormat } from "./block.js"
import { attribute, type InvokeSyntax, parseInvokes } from "./invokes.js"
import { typedValue } from "./typedArgs.js"

const unescape = (text: string | undefined): string | undefined =>
  text?.replace(/&(amp|quot);/g, (_m, entity: string) => (entity === "amp" ? "&" : "\""))

const DECLARED = new Set(["string", "number", "integer", "boolean", "null", "object", "array"])

// The declared type reads the value; without one (or an unknown one) the schema does.
const kimiValue = (raw: string, header: string, schema: unknown): unknown => {
  const type = unescape(attribute(header, "type"))?.toLowerCase()
  return typedValue(raw, type !== undefined && DECLARED.has(type) ? { type } : schema)
}

const syntax: InvokeSyntax = {
  where: "<|open|>tools<|sep|>",
  invoke: "<|open|>call",
  invokeEnd: "<|close|>call<|sep|>",
  param: "<|open|>argument",
  paramEnd: "<|close|>argument<|sep|>",
  headerEnd: "<|sep|>",
  callName: (header) => unescape(attribute(header, "tool")),
  paramName: (header) => unescape(attribute(header, "key")),
  value: kimiValue,
  jsonArgs: { open: "<|open|>json", close: "<|close|>json<|sep|>" }
}

export const kimiK3: TagFormat = {
  format: "kimi_k3",
  open: "<|open|>tools<|sep|>",
  close: "<|close|>tools<|sep|>",
  committed: "<|open|>tools".length,
  claims: () => true,
  parse: (body, closed, tools) => parseInvokes(syntax, body, closed, tools)
}
