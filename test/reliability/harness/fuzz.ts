import { FastCheck as fc } from "effect"
import { type EdgeLike, idleViolations } from "./edge.js"
import { chatUrl, get, percentile, pool, send, tally, verdict } from "./exchange.js"

/**
 * Hostile request bodies, generated with fast-check, against one running edge
 * (echo models only): wrong types for every field, huge strings, deep
 * nesting, invalid UTF-8, giant tool schemas, `$ref` loops (with strict
 * models, so validation runs), unknown fields, empty and non-JSON bodies.
 *
 * The edge must answer every one with a well-formed response: 200 (JSON or a
 * well-formed SSE stream), 400 in the OpenAI error shape whose `param` or
 * message names the field when the body was a JSON object, 404 for an unknown
 * model; never a 5xx except `tool_validation_error` (the contract's 502 for a
 * run whose tool calls do not validate: strict models, and text tool-call
 * markup that does not parse), never a dropped connection or a crash.
 */

export const FUZZ_MODELS = ["echo", "strict", "strict-buffered"] as const
export type FuzzModel = (typeof FUZZ_MODELS)[number]

export const fuzzEdgeConfig = () => ({
  runs: { idleTimeoutMs: 20_000 },
  models: [
    { id: "echo", provider: { type: "echo", tokenDelayMs: 0 } },
    { id: "strict", provider: { type: "echo", tokenDelayMs: 0 }, output: { strict: true } },
    { id: "strict-buffered", provider: { type: "echo", tokenDelayMs: 0 }, output: { strict: true, streamBuffer: true } }
  ]
})

/** The default `server.maxBodyBytes`. */
const MAX_BODY_BYTES = 4 * 1024 * 1024

export interface FuzzCase {
  readonly kind: string
  /** What was sent: a string (UTF-8) or raw bytes. */
  readonly body: string | Uint8Array
  readonly contentType: string | undefined
  /** The model the body asks for, when it names a configured one. */
  readonly model: string | undefined
  /** The top-level field this case broke on purpose (its error must name it). */
  readonly brokenField: string | undefined
}

// ---------------------------------------------------------------------------
// building blocks

const WEATHER = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
  }
}

const call = (name: string, args: string): string => `<tool_call>{"name": ${JSON.stringify(name)}, "arguments": ${args}}</tool_call>`

const KNOWN_FIELDS = [
  "model", "messages", "stream", "stream_options", "tools", "tool_choice", "parallel_tool_calls", "temperature",
  "top_p", "max_tokens", "max_completion_tokens", "stop", "seed", "presence_penalty", "frequency_penalty",
  "response_format", "n", "metadata", "include_reasoning", "reasoning"
] as const

const KNOWN = new Set<string>([...KNOWN_FIELDS, "__proto__", "constructor"])

const leaf = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer({ min: -1_000_000, max: 1_000_000 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(1e308, -1e308, 5e-324, 2 ** 53 + 1, -0),
  fc.string({ maxLength: 24 }),
  fc.constantFrom("", " ", "\u0000", "\ud800", "\uffff", "🙂", "null", "true", "0", "user", "function", "<tool_call>", "{{tool_call}}")
)

/** Any JSON value of small size (as a wrong value for a field). */
const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: leaf },
  { weight: 2, arbitrary: fc.array(leaf, { maxLength: 4 }) },
  { weight: 2, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), leaf, { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }) }
)

const text = fc.oneof(
  { weight: 6, arbitrary: fc.string({ maxLength: 60 }) },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 30 }) },
  { weight: 1, arbitrary: fc.constantFrom("<think>hmm</think>hi", "<|im_end|>", "<tool", "{{", "</s>", "<tool_call>{\"name\": \"x\"") }
)

const baseRequest = fc.record({
  model: fc.constantFrom<FuzzModel>(...FUZZ_MODELS),
  stream: fc.boolean(),
  text,
  tools: fc.boolean(),
  usage: fc.boolean(),
  system: fc.boolean()
}).map((b) => ({
  model: b.model,
  stream: b.stream,
  ...(b.usage && b.stream ? { stream_options: { include_usage: true } } : {}),
  messages: [...(b.system ? [{ role: "system", content: "be brief" }] : []), { role: "user", content: b.text }],
  ...(b.tools ? { tools: [WEATHER] } : {})
}))

type Path = ReadonlyArray<string | number>

/** Every place a wrong value may go. The first element is the top-level field its error must name. */
const PATHS: ReadonlyArray<Path> = [
  ["model"], ["messages"], ["messages", 0], ["messages", 0, "role"], ["messages", 0, "content"], ["messages", 0, "name"],
  ["messages", 0, "tool_calls"], ["messages", 0, "tool_calls", 0], ["messages", 0, "tool_calls", 0, "function"],
  ["messages", 0, "tool_calls", 0, "function", "arguments"], ["messages", 0, "tool_call_id"], ["messages", 0, "content", 0],
  ["messages", 0, "content", 0, "type"], ["messages", 0, "reasoning_content"], ["stream"], ["stream_options"],
  ["stream_options", "include_usage"], ["tools"], ["tools", 0], ["tools", 0, "type"], ["tools", 0, "function"],
  ["tools", 0, "function", "name"], ["tools", 0, "function", "description"], ["tools", 0, "function", "parameters"],
  ["tools", 0, "function", "strict"], ["tool_choice"], ["tool_choice", "function"], ["tool_choice", "function", "name"],
  ["parallel_tool_calls"], ["temperature"], ["top_p"], ["max_tokens"], ["max_completion_tokens"], ["stop"], ["stop", 0],
  ["seed"], ["presence_penalty"], ["frequency_penalty"], ["response_format"], ["n"], ["metadata"], ["metadata", "k"],
  ["include_reasoning"], ["reasoning"], ["reasoning", "exclude"]
]

/** Sets `value` at `path`, creating the containers on the way (a copy of `root`). */
const setPath = (root: any, path: Path, value: unknown): any => {
  const copy = structuredClone(root)
  let at = copy
  for (let i = 0; i < path.length - 1; i++) {
    const key = path[i]!
    const nextIsIndex = typeof path[i + 1] === "number"
    if (typeof at[key] !== "object" || at[key] === null) at[key] = nextIsIndex ? [] : {}
    at = at[key]
  }
  at[path[path.length - 1]!] = value
  return copy
}

const deleteField = (root: any, key: string): any => {
  const copy = structuredClone(root)
  delete copy[key]
  return copy
}

const caseOf = (kind: string, value: unknown, extra: Partial<Omit<FuzzCase, "kind" | "body">> = {}): FuzzCase => ({
  kind,
  body: JSON.stringify(value),
  contentType: "application/json",
  model: typeof (value as { model?: unknown })?.model === "string" ? (value as { model: string }).model : undefined,
  brokenField: undefined,
  ...extra
})

/** A JSON text with `placeholder` (a JSON string somewhere in `value`) replaced by `raw` JSON text. */
const spliced = (value: unknown, placeholder: string, raw: string): string =>
  JSON.stringify(value).replace(JSON.stringify(placeholder), raw)

const deepText = (depth: number, shape: "array" | "object" | "mixed"): string => {
  switch (shape) {
    case "array":
      return "[".repeat(depth) + "1" + "]".repeat(depth)
    case "object":
      return "{\"a\":".repeat(depth) + "1" + "}".repeat(depth)
    case "mixed":
      return "{\"a\":[".repeat(depth / 2) + "{}" + "]}".repeat(depth / 2)
  }
}

const deepSchemaText = (depth: number): string =>
  "{\"type\":\"object\",\"properties\":{\"a\":".repeat(depth) + "{\"type\":\"string\"}" + "}}".repeat(depth)

// ---------------------------------------------------------------------------
// case kinds

/** One field set to a wrong value (or removed): a 400 must name the field. */
const wrongType = fc.tuple(baseRequest, fc.constantFrom(...PATHS), anyValue).map(([req, path, value]) =>
  caseOf("wrong type", setPath(req, path, value), { brokenField: String(path[0]) })
)

const missing = fc.tuple(baseRequest, fc.constantFrom("model", "messages")).map(([req, key]) =>
  caseOf("missing field", deleteField(req, key), { brokenField: key })
)

const unknownFields = fc.tuple(
  baseRequest,
  fc.dictionary(fc.string({ minLength: 1, maxLength: 16 }).filter((k) => !KNOWN.has(k)), fc.jsonValue({ maxDepth: 3 }), {
    minKeys: 1,
    maxKeys: 6
  }),
  fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }).filter((k) => !["role", "content", "name", "tool_calls", "tool_call_id", "reasoning_content", "__proto__"].includes(k)), leaf, { maxKeys: 3 })
).map(([req, extra, inMessage]) => {
  const value: any = { ...extra, ...req }
  value.messages = value.messages.map((m: object) => ({ ...inMessage, ...m }))
  return caseOf("unknown fields", value)
})

const HUGE_CHARS = ["x", "é", "€", "🙂", " ", "\"", "\\", "\n", "<", "\u0001"] as const
const bytesPerChar = (ch: string): number => (ch === "\u0001" ? 6 : ch === "\"" || ch === "\\" || ch === "\n" ? 2 : Buffer.byteLength(ch))

const hugeString = fc
  .record({ ch: fc.constantFrom(...HUGE_CHARS), bytes: fc.integer({ min: 100_000, max: 1_000_000 }) })
  .map(({ ch, bytes }) => ch.repeat(Math.floor(bytes / bytesPerChar(ch) / ch.length)))

const HUGE_PLACES = ["model", "system", "unknown", "metadata", "description", "user", "stop", "arguments", "tool name"] as const

const huge = fc.tuple(baseRequest, fc.constantFrom(...HUGE_PLACES), hugeString).map(([req, place, s]) => {
  const r: any = structuredClone(req)
  switch (place) {
    case "model":
      return caseOf("huge string", { ...r, model: s })
    case "system":
      r.messages.unshift({ role: "system", content: s })
      break
    case "unknown":
      r.x_huge = s
      break
    case "metadata":
      r.metadata = { note: s }
      break
    case "description":
      r.tools = [setPath(WEATHER, ["function", "description"], s)]
      break
    case "user":
      r.messages[r.messages.length - 1].content = s
      r.max_tokens = 8
      break
    case "stop":
      r.stop = s
      break
    case "arguments":
      r.tools = [WEATHER]
      r.messages[r.messages.length - 1].content = call("get_weather", JSON.stringify({ city: s }))
      break
    case "tool name":
      r.tools = [setPath(WEATHER, ["function", "name"], s)]
      break
  }
  return caseOf(`huge string (${place})`, r)
})

const DEEP_PLACES = ["unknown", "content", "content part", "response_format", "metadata", "parameters", "arguments", "tool_choice"] as const

const deep = fc
  .tuple(baseRequest, fc.constantFrom(...DEEP_PLACES), fc.integer({ min: 900, max: 1_000 }), fc.constantFrom("array", "object", "mixed") as fc.Arbitrary<"array" | "object" | "mixed">)
  .map(([req, place, depth, shape]) => {
    const r: any = structuredClone(req)
    const HOLE = "__deep__"
    let raw = deepText(depth, shape)
    let brokenField: string | undefined
    switch (place) {
      case "unknown":
        r.x_deep = HOLE
        break
      case "content":
        r.messages[r.messages.length - 1].content = HOLE
        brokenField = "messages"
        break
      case "content part":
        r.messages[r.messages.length - 1].content = [{ type: "text", text: "hi", extra: HOLE }]
        break
      case "response_format":
        r.response_format = { type: "json_schema", json_schema: HOLE }
        break
      case "metadata":
        r.metadata = { k: HOLE }
        brokenField = "metadata"
        break
      case "parameters":
        r.tools = [setPath(WEATHER, ["function", "parameters"], HOLE)]
        raw = deepSchemaText(depth)
        r.messages[r.messages.length - 1].content = call("get_weather", "{\"a\": {\"a\": \"x\"}}")
        break
      case "arguments":
        r.tools = [WEATHER]
        r.messages[r.messages.length - 1].content = call("get_weather", "@@ARGS@@")
        break
      case "tool_choice":
        r.tool_choice = HOLE
        brokenField = "tool_choice"
        break
    }
    let body = spliced(r, HOLE, raw)
    if (place === "arguments") body = body.replace("@@ARGS@@", deepText(depth, shape).replace(/"/g, "\\\""))
    return { ...caseOf(`deep nesting (${place})`, r, brokenField !== undefined ? { brokenField } : {}), body }
  })

/** Invalid UTF-8 sequences: stray continuation bytes, truncated sequences, overlongs, surrogates, > U+10FFFF. */
const BAD_BYTES: ReadonlyArray<ReadonlyArray<number>> = [
  [0xff], [0xfe], [0x80], [0xbf], [0xc3], [0xc3, 0x28], [0xe2, 0x82], [0xe2, 0x28, 0xa1], [0xf0, 0x9f, 0x98],
  [0xc0, 0xaf], [0xe0, 0x80, 0xaf], [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf], [0xf4, 0x90, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x00]
]

const invalidUtf8 = fc
  .tuple(baseRequest, fc.array(fc.constantFrom(...BAD_BYTES), { minLength: 1, maxLength: 6 }), fc.constantFrom("in content", "in a key", "in the model", "outside strings", "in metadata"))
  .map(([req, seqs, where]) => {
    const r: any = structuredClone(req)
    const MARK = "@@BAD@@"
    switch (where) {
      case "in content":
        r.messages[r.messages.length - 1].content = `a${MARK}b`
        break
      case "in a key":
        r[`x${MARK}`] = 1
        break
      case "in the model":
        r.model = `echo${MARK}`
        break
      case "outside strings":
        r.z = 0
        break
      case "in metadata":
        r.metadata = { [`k${MARK}`]: `v${MARK}` }
        break
    }
    let json = JSON.stringify(r)
    if (where === "outside strings") json = json.replace("\"z\":0", `"z":0${MARK}`)
    const bad = Buffer.from(seqs.flat())
    const parts = json.split(MARK).map((p) => Buffer.from(p, "utf8"))
    const body = Buffer.concat(parts.flatMap((p, i) => (i === 0 ? [p] : [bad, p])))
    return { ...caseOf(`invalid UTF-8 (${where})`, r), body: new Uint8Array(body) }
  })

const giantTools = (maxSize: number) => fc
  .tuple(baseRequest, fc.constantFrom("many properties", "many tools", "huge enum", "many required"), fc.integer({ min: Math.min(200, maxSize), max: maxSize }), fc.constantFrom("strict", "strict-buffered", "echo"))
  .map(([req, shape, n, model]) => {
    const r: any = { ...structuredClone(req), model }
    const props: Record<string, object> = {}
    switch (shape) {
      case "many properties":
        for (let i = 0; i < n; i++) props[`p${i}`] = { type: i % 3 === 0 ? "string" : i % 3 === 1 ? "integer" : "boolean", description: `property ${i}` }
        r.tools = [{ type: "function", function: { name: "big", parameters: { type: "object", properties: props, required: ["p0"] } } }]
        r.messages[r.messages.length - 1].content = call("big", JSON.stringify({ p0: "x", p1: 1, p2: true }))
        break
      case "many tools":
        r.tools = Array.from({ length: Math.floor(n / 5) }, (_, i) => setPath(WEATHER, ["function", "name"], `tool_${i}`))
        r.messages[r.messages.length - 1].content = call(`tool_${Math.floor(n / 10)}`, "{\"city\": \"Paris\"}")
        break
      case "huge enum":
        r.tools = [{ type: "function", function: { name: "pick", parameters: { type: "object", properties: { v: { enum: Array.from({ length: n * 3 }, (_, i) => `v${i}`) } }, required: ["v"] } } }]
        r.messages[r.messages.length - 1].content = call("pick", JSON.stringify({ v: `v${n}` }))
        break
      case "many required":
        for (let i = 0; i < n; i++) props[`r${i}`] = { type: "string" }
        r.tools = [{ type: "function", function: { name: "req", parameters: { type: "object", properties: props, required: Object.keys(props) } } }]
        r.messages[r.messages.length - 1].content = call("req", "{\"r0\": \"only one\"}")
        break
    }
    return caseOf(`giant tool schema (${shape})`, r)
  })

/** Tool schemas with `$ref` loops, unresolvable and remote refs, and legitimately recursive ones. */
const REF_SCHEMAS: ReadonlyArray<readonly [string, object]> = [
  ["self #", { $ref: "#" }],
  ["a→b→a", { $ref: "#/definitions/a", definitions: { a: { $ref: "#/definitions/b" }, b: { $ref: "#/definitions/a" } } }],
  ["$defs self", { $ref: "#/$defs/x", $defs: { x: { $ref: "#/$defs/x" } } }],
  ["allOf #", { type: "object", allOf: [{ $ref: "#" }] }],
  ["property → root", { type: "object", properties: { a: { $ref: "#" } } }],
  ["root → property → root", { $ref: "#/properties/a", properties: { a: { $ref: "#" } } }],
  ["recursive tree", { $ref: "#/$defs/node", $defs: { node: { type: "object", properties: { child: { $ref: "#/$defs/node" }, v: { type: "integer" } } } } }],
  ["missing", { $ref: "#/definitions/missing" }],
  ["remote", { $ref: "http://127.0.0.1:9/schema.json" }],
  ["$id loop", { $id: "http://example.invalid/s", $ref: "http://example.invalid/s" }],
  ["$dynamicRef", { $dynamicAnchor: "n", type: "object", properties: { c: { $dynamicRef: "#n" } } }],
  ["$recursiveRef", { $recursiveAnchor: true, type: "object", properties: { c: { $recursiveRef: "#" } } }],
  ["bad pointer", { $ref: "#/definitions/a/~2" , definitions: { a: {} } }],
  ["not an object", { $ref: 42 }],
  ["anyOf loop", { anyOf: [{ $ref: "#/anyOf/1" }, { $ref: "#/anyOf/0" }] }]
]

const nestedArgs = (depth: number): string => "{\"child\":".repeat(depth) + "{\"v\": 1}" + "}".repeat(depth)

const refLoops = fc
  .tuple(
    baseRequest,
    fc.constantFrom(...REF_SCHEMAS),
    fc.constantFrom("strict", "strict-buffered", "echo"),
    fc.oneof(fc.constant("{\"a\": 1}"), fc.constant("{}"), fc.integer({ min: 1, max: 1_000 }).map(nestedArgs), fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)))
  )
  .map(([req, [name, schema], model, args]) => {
    const r: any = { ...structuredClone(req), model }
    r.tools = [{ type: "function", function: { name: "loop", parameters: schema } }, WEATHER]
    r.messages[r.messages.length - 1].content = call("loop", args)
    return caseOf(`$ref loop (${name})`, r)
  })

const NOT_JSON = ["", " ", "\n\n", "null", "[]", "{}", "0", "true", "\"text\"", "{", "}", "[{}]", "{\"model\":", "{\"model\":\"echo\",}",
  "{'model':'echo'}", "NaN", "{\"model\": NaN}", "\ufeff{\"model\":\"echo\",\"messages\":[{\"role\":\"user\",\"content\":\"bom\"}]}",
  "{\"model\":\"echo\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]} trailing", "/* c */ {}", "\u0000", "[[[[[[", "1e999999"]

const notJson = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...NOT_JSON).map((body) => ({ ...caseOf("empty or not JSON", null), body })) },
  { weight: 2, arbitrary: fc.string({ maxLength: 200 }).map((body) => ({ ...caseOf("random text", null), body })) },
  {
    weight: 3,
    arbitrary: fc.tuple(baseRequest, fc.nat()).map(([req, cut]) => {
      const json = JSON.stringify(req)
      return { ...caseOf("truncated JSON", req), body: json.slice(0, cut % json.length) }
    })
  },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }).filter((v) => typeof v !== "object" || v === null || Array.isArray(v)).map((v) => caseOf("JSON but not an object", v)) }
)

const valid = baseRequest.map((req) => caseOf("valid", req))

const withContentType = (arb: fc.Arbitrary<FuzzCase>): fc.Arbitrary<FuzzCase> =>
  fc.tuple(arb, fc.constantFrom<string | undefined>("application/json", "application/json", "application/json", "text/plain", undefined, "application/x-www-form-urlencoded", "application/json; charset=latin1"))
    .map(([c, contentType]) => ({ ...c, contentType }))

/**
 * The case generator. `giantMax` bounds the size of the giant tool schemas
 * (properties, required names, tools × 5, enum values / 3): compiling a schema
 * costs the edge time superlinear in it, so the bounded test run keeps it
 * lower than the soak (see the dedicated giant-schema test).
 */
export const makeFuzzCase = (giantMax: number): fc.Arbitrary<FuzzCase> =>
  withContentType(
    fc.oneof(
      { weight: 30, arbitrary: wrongType },
      { weight: 4, arbitrary: missing },
      { weight: 10, arbitrary: unknownFields },
      { weight: 3, arbitrary: huge },
      { weight: 6, arbitrary: deep },
      { weight: 8, arbitrary: invalidUtf8 },
      { weight: 2, arbitrary: giantTools(giantMax) },
      { weight: 8, arbitrary: refLoops },
      { weight: 14, arbitrary: notJson },
      { weight: 10, arbitrary: valid }
    )
  )

export const GIANT_MAX_TEST = 1_200
export const GIANT_MAX_SOAK = 3_000

const generators = new Map<number, fc.Arbitrary<FuzzCase>>()

/** Case `index` of the run with `seed` (reproducible one by one). */
export const generateCase = (seed: number, index: number, giantMax = GIANT_MAX_TEST): FuzzCase => {
  let arb = generators.get(giantMax)
  if (arb === undefined) {
    arb = makeFuzzCase(giantMax)
    generators.set(giantMax, arb)
  }
  return fc.sample(arb, { seed: seed + index, numRuns: 1 })[0]!
}

/** A strict request whose one tool has `n` string properties, and a valid call of it. */
export const giantSchemaRequest = (n: number, stream: boolean) => {
  const properties: Record<string, object> = {}
  for (let i = 0; i < n; i++) properties[`p${i}`] = { type: "string", description: `property ${i}` }
  return {
    model: "strict",
    stream,
    messages: [{ role: "user", content: call("big", JSON.stringify({ p0: "x", p1: "y" })) }],
    tools: [{ type: "function", function: { name: "big", parameters: { type: "object", properties, required: ["p0"] } } }]
  }
}

// ---------------------------------------------------------------------------
// checks

const FIELD_NAMES = new RegExp(`\\b(${KNOWN_FIELDS.join("|")})\\b`)

const describeCase = (c: FuzzCase, index: number, seed: number): string => {
  const bytes = typeof c.body === "string" ? Buffer.from(c.body) : Buffer.from(c.body)
  const preview = bytes.subarray(0, 160).toString("utf8")
  return `case ${index} (seed ${seed + index}, ${c.kind}, ${bytes.length} bytes, content-type ${String(c.contentType)}): ${JSON.stringify(preview)}`
}

/** The violations of one answer. */
export const checkAnswer = (c: FuzzCase, ex: Parameters<typeof verdict>[0]): { outcome: string; violations: Array<string> } => {
  const v = verdict(ex)
  const violations = [...v.violations]
  const bytes = typeof c.body === "string" ? Buffer.byteLength(c.body) : c.body.byteLength
  const decoded = typeof c.body === "string" ? c.body : Buffer.from(c.body).toString("utf8")
  let parsed: unknown
  let isJson = false
  try {
    parsed = JSON.parse(decoded)
    isJson = true
  } catch {
    isJson = false
  }
  const isObject = isJson && typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
  const model = isObject ? (parsed as { model?: unknown }).model : undefined
  const tools = isObject ? (parsed as { tools?: unknown }).tools : undefined
  /**
   * Where the contract allows `tool_validation_error` (a run failing): a
   * strict model, and any model whose request has tools (text tool-call
   * markup that does not parse is a validation failure in both modes).
   */
  const validationMayFail = model === "strict" || model === "strict-buffered" || (Array.isArray(tools) && tools.length > 0)
  const status = ex.status
  const errorType = v.json?.error?.type
  if (status === 0) {
    // verdict already reported it
  } else if (status >= 500) {
    const allowed = validationMayFail && status === 502 && errorType === "tool_validation_error"
    if (!allowed) violations.push(`HTTP ${status} ${String(errorType)}: ${String(v.errorMessage).slice(0, 300)}`)
  } else if (status === 400) {
    if (errorType !== "invalid_request_error") violations.push(`400 with error.type ${String(errorType)}`)
    if (isObject) {
      const param = v.json?.error?.param
      const message = String(v.errorMessage ?? "")
      const named = (typeof param === "string" && param !== "") || FIELD_NAMES.test(message)
      if (!named) violations.push(`400 for a JSON object names no field: param ${JSON.stringify(param)}, message ${JSON.stringify(message.slice(0, 200))}`)
      if (c.brokenField !== undefined && named) {
        const where = typeof param === "string" && param !== "" ? param : message
        if (!where.includes(c.brokenField)) violations.push(`400 names ${JSON.stringify(where.slice(0, 120))}, not the broken field ${c.brokenField}`)
      }
    }
  } else if (status === 404) {
    if (v.json?.error?.code !== "model_not_found") violations.push(`404 with error.code ${String(v.json?.error?.code)}`)
    if (isObject && FUZZ_MODELS.some((m) => m === model)) violations.push(`404 for a configured model ${String(model)}`)
  } else if (status === 413) {
    if (bytes <= MAX_BODY_BYTES) violations.push(`413 for a ${bytes}-byte body (limit ${MAX_BODY_BYTES})`)
  } else if (status === 200) {
    if (!isObject) violations.push(`200 for a body that is not a JSON object`)
    const okOutcome = v.outcome.includes(":finish:") || (validationMayFail && v.outcome === "sse:error:tool_validation_error")
    if (!okOutcome) violations.push(`200 ending in ${v.outcome}${v.errorMessage !== undefined ? `: ${v.errorMessage.slice(0, 200)}` : ""}`)
  } else {
    violations.push(`unexpected HTTP ${status}: ${ex.body.slice(0, 200)}`)
  }
  return { outcome: status === 0 ? v.outcome : `${status}${status === 200 ? ` ${v.outcome.split(":").slice(0, 2).join(":")}` : ""}`, violations }
}

export interface FuzzReport {
  readonly cases: number
  readonly seed: number
  readonly byKind: Record<string, Record<string, number>>
  /** Summed response time per kind, ms (where the time goes). */
  readonly msByKind: Record<string, number>
  readonly statuses: Record<string, number>
  readonly violations: ReadonlyArray<string>
  readonly violationCount: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  /** The slowest cases, for the report. */
  readonly slowest: ReadonlyArray<string>
  readonly ms: number
}

/** Sends `cases` generated bodies (at most `concurrency` at once), then checks the edge is still up and idle. */
export const runFuzz = async (
  edge: EdgeLike,
  options: {
    readonly cases: number
    readonly seed: number
    readonly concurrency?: number
    readonly timeoutMs?: number
    readonly giantMax?: number
  }
): Promise<FuzzReport> => {
  const started = Date.now()
  const violations: Array<string> = []
  let violationCount = 0
  const byKind: Record<string, Record<string, number>> = {}
  const msByKind: Record<string, number> = {}
  const durations: Array<number> = []
  const slow: Array<{ ms: number; what: string }> = []
  const outcomes: Array<string> = []
  let crashed = false
  await pool(options.cases, options.concurrency ?? 8, async (i) => {
    if (crashed) return
    const c = generateCase(options.seed, i, options.giantMax)
    const headers: Record<string, string> = c.contentType !== undefined ? { "content-type": c.contentType } : {}
    const ex = await send(chatUrl(edge.baseURL), c.body, { headers, timeoutMs: options.timeoutMs ?? 30_000, omitContentType: c.contentType === undefined })
    durations.push(ex.ms)
    if (ex.ms > 1_000) slow.push({ ms: ex.ms, what: `${ex.ms} ms ${describeCase(c, i, options.seed).slice(0, 200)}` })
    const { outcome, violations: found } = checkAnswer(c, ex)
    outcomes.push(outcome)
    const kind = c.kind.replace(/ \(.*\)$/, "")
    msByKind[kind] = (msByKind[kind] ?? 0) + ex.ms
    byKind[kind] = byKind[kind] ?? {}
    byKind[kind]![outcome] = (byKind[kind]![outcome] ?? 0) + 1
    if (found.length > 0) {
      violationCount++
      if (violations.length < 30) violations.push(`${describeCase(c, i, options.seed)}\n    → ${found.join("\n    → ")}`)
    }
    if (edge.proc.exitCode !== null || edge.proc.signalCode !== null) {
      crashed = true
      violations.push(`the edge exited (${edge.proc.exitCode ?? edge.proc.signalCode}) at ${describeCase(c, i, options.seed)}`)
    }
  })
  const health = await get(`${edge.url}/healthz`).then((r) => r.status, (e: unknown) => String(e))
  if (health !== 200) violations.push(`/healthz after the fuzz: ${health}`)
  violations.push(...(await idleViolations(edge.url, "after the fuzz", 10_000)))
  return {
    cases: options.cases,
    seed: options.seed,
    byKind,
    msByKind,
    statuses: tally(outcomes),
    violations,
    violationCount,
    p50Ms: percentile(durations, 50),
    p99Ms: percentile(durations, 99),
    maxMs: durations.reduce((m, d) => Math.max(m, d), 0),
    slowest: slow.sort((a, b) => b.ms - a.ms).slice(0, 8).map((s) => s.what),
    ms: Date.now() - started
  }
}
