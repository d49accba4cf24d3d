import { Ajv2020 } from "ajv/dist/2020.js"
import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { DEFAULT_TEXT_FORMATS, type TextFormat } from "../../../src/protocol/ModelOptions.js"
import type { FunctionTool, SubmitRunRequest, ToolChoice } from "../../../src/protocol/SubmitRunRequest.js"
import { toolCallGrammar, type ToolCallGrammarRequest } from "../../../src/providers/constraints/toolCallGrammar.js"
import { makeGrammarCache } from "../../../src/providers/openai/grammarCache.js"
import {
  needsConstraint,
  type OutputPlan,
  ownConstraint,
  type PlanContext,
  planOutput
} from "../../../src/providers/openai/outputConstraint.js"
import {
  LLAMA_CPP,
  NO_KIND,
  ollama,
  takesStructuredOutputs,
  type UpstreamKind,
  vllm
} from "../../../src/providers/openai/upstreamKind.js"
import { accepts, parseGbnf } from "../../support/gbnf.js"

const BOOK_FLIGHT = {
  type: "object",
  properties: {
    from: { type: "string", pattern: "^[A-Z]{3}$" },
    cabin: { enum: ["economy", "business"] },
    passengers: { type: "integer", minimum: 1, maximum: 9 }
  },
  required: ["from", "cabin", "passengers"],
  additionalProperties: false
}
const book: FunctionTool = { type: "function", function: { name: "book_flight", parameters: BOOK_FLIGHT } }
const strictBook: FunctionTool = { type: "function", function: { ...book.function, strict: true } }
const time: FunctionTool = { type: "function", function: { name: "get_time", parameters: { type: "object", properties: {} } } }

const request = (fields: Partial<SubmitRunRequest> = {}): SubmitRunRequest => ({
  model: "m",
  messages: [{ role: "user", content: "Book a flight." }],
  tools: [book, time],
  sampling: {},
  metadata: {},
  ...fields
})
const named = (name: string): ToolChoice => ({ type: "function", function: { name } })

const context = (kind: UpstreamKind, fields: Partial<PlanContext> = {}): PlanContext => ({
  kind,
  toolMode: "native",
  toolFormats: DEFAULT_TEXT_FORMATS,
  strictModel: false,
  ...fields
})

const grammarOf = (plan: OutputPlan): string => {
  const g = plan.fields["grammar"]
  if (typeof g !== "string") throw new Error("no grammar")
  return g
}
const grammarAccepts = (grammar: string, text: string): boolean => {
  const parsed = parseGbnf(grammar)
  if (!parsed.ok) throw new Error(parsed.error)
  return accepts(parsed.grammar, text)
}
// The markup as the grammar writes it: `{"name": …, "arguments": …}` with its spaces.
const call = (name: string, args: unknown) =>
  `<tool_call>\n{"name": ${JSON.stringify(name)}, "arguments": ${JSON.stringify(args)}}\n</tool_call>`
const VALID = { from: "OSL", cabin: "economy", passengers: 2 }

describe("needsConstraint: tools it must call, or strict ones", () => {
  it("required, named, a replay's tool, a strict tool or a strict model; never without tools or under none", () => {
    expect(needsConstraint(request({ toolChoice: "required" }), false)).toBe(true)
    expect(needsConstraint(request({ toolChoice: named("get_time") }), false)).toBe(true)
    expect(needsConstraint(request({ replayTool: "book_flight" }), false)).toBe(true)
    expect(needsConstraint(request({ tools: [strictBook, time] }), false)).toBe(true)
    expect(needsConstraint(request(), true)).toBe(true)
    expect(needsConstraint(request(), false)).toBe(false)
    expect(needsConstraint(request({ toolChoice: "auto" }), false)).toBe(false)
  })

  it.prop("no tools, or tool_choice none: never", [
    FastCheck.constantFrom<ToolChoice | undefined>("none", "auto", "required", undefined, named("book_flight")),
    FastCheck.boolean(),
    FastCheck.boolean(),
    FastCheck.option(FastCheck.constant("book_flight"), { nil: undefined })
  ], ([choice, strict, withTools, replay]) => {
    const r = request({
      tools: withTools ? [strictBook] : [],
      ...(choice !== undefined ? { toolChoice: choice } : {}),
      ...(replay !== undefined ? { replayTool: replay } : {})
    })
    if (!withTools || choice === "none") expect(needsConstraint(r, strict)).toBe(false)
  })
})

describe("ownConstraint: the caller's (or extraBody's) constraint wins", () => {
  it("an upstream constraint field, a JSON response_format, or one in extraBody", () => {
    expect(ownConstraint(request({ sampling: { constraints: { grammar: "root ::= \"x\"" } } }))).toBe(true)
    expect(ownConstraint(request({ sampling: { constraints: { structured_outputs: { json: {} } } } }))).toBe(true)
    expect(ownConstraint(request({ sampling: { responseFormat: { type: "json_schema", json_schema: { schema: {} } } } }))).toBe(true)
    expect(ownConstraint(request({ sampling: { responseFormat: { type: "json_object" } } }))).toBe(true)
    expect(ownConstraint(request(), { grammar: "root ::= \"x\"" })).toBe(true)
    expect(ownConstraint(request({ sampling: { responseFormat: { type: "text" } } }), { top_k: 40 })).toBe(false)
    // A backend choice constrains nothing.
    expect(ownConstraint(request({ sampling: { constraints: { guided_decoding_backend: "xgrammar" } } }))).toBe(false)
  })
})

describe("planOutput: llama.cpp", () => {
  it("required, from a native model: text mode, the grammar of its calls, constraint grammar", () => {
    const plan = planOutput(request({ toolChoice: "required" }), context(LLAMA_CPP))
    expect(plan).toMatchObject({ toolMode: "text", shape: "hermes", constraint: "grammar" })
    expect(Object.keys(plan.fields)).toEqual(["grammar"])
    const grammar = grammarOf(plan)
    expect(grammarAccepts(grammar, call("book_flight", VALID))).toBe(true)
    expect(grammarAccepts(grammar, call("book_flight", { ...VALID, passengers: 12 }))).toBe(false)
    expect(grammarAccepts(grammar, `Sure. ${call("book_flight", VALID)}`)).toBe(false)
  })

  it("auto with a strict tool or a strict model: free text, then optionally calls", () => {
    for (const [r, strictModel] of [[request({ tools: [strictBook, time] }), false], [request(), true]] as const) {
      const grammar = grammarOf(planOutput(r, context(LLAMA_CPP, { strictModel })))
      expect(grammarAccepts(grammar, "No flight today.")).toBe(true)
      expect(grammarAccepts(grammar, `Booking. ${call("book_flight", VALID)}`)).toBe(true)
    }
  })

  it("a request that needs none is sent as it is: native, no fields, constraint none", () => {
    const r = request({ toolChoice: "auto" })
    expect(planOutput(r, context(LLAMA_CPP))).toEqual({ request: r, toolMode: "native", shape: "hermes", fields: {}, constraint: "none" })
  })

  it("a model that does not parse Hermes markup (no xml format) is not constrained: native, none", () => {
    const formats: ReadonlyArray<TextFormat> = DEFAULT_TEXT_FORMATS.filter((f) => f !== "xml")
    const plan = planOutput(request({ toolChoice: "required" }), context(LLAMA_CPP, { toolFormats: formats }))
    expect(plan).toMatchObject({ toolMode: "native", constraint: "none", fields: {} })
  })

  it("a text-mode model stays in text mode, constrained or not", () => {
    expect(planOutput(request({ toolChoice: "required" }), context(LLAMA_CPP, { toolMode: "text" })).toolMode).toBe("text")
    expect(planOutput(request(), context(NO_KIND, { toolMode: "text" })).toolMode).toBe("text")
  })

  it("a named tool the request does not have: no grammar (validation says so)", () => {
    expect(planOutput(request({ toolChoice: named("nope") }), context(LLAMA_CPP)).constraint).toBe("none")
  })
})

describe("planOutput: a constrained replay", () => {
  it("allows only a call of the replayed tool, sent as a named choice", () => {
    const plan = planOutput(request({ toolChoice: "auto", replayTool: "book_flight" }), context(LLAMA_CPP))
    expect(plan.request.toolChoice).toEqual(named("book_flight"))
    const grammar = grammarOf(plan)
    expect(grammarAccepts(grammar, call("book_flight", VALID))).toBe(true)
    expect(grammarAccepts(grammar, call("get_time", {}))).toBe(false)
    expect(grammarAccepts(grammar, "Not now.")).toBe(false)
  })

  it("an upstream that cannot constrain replays the request exactly", () => {
    const r = request({ toolChoice: "auto", replayTool: "book_flight" })
    expect(planOutput(r, context(NO_KIND)).request).toBe(r)
  })
})

describe("planOutput: vLLM", () => {
  it("the same grammar, as structured_outputs from 0.10.2 on (or version unknown), guided_grammar before", () => {
    const r = request({ toolChoice: "required" })
    const grammar = grammarOf(planOutput(r, context(LLAMA_CPP)))
    for (const version of [undefined, "0.10.2", "0.11.0", "0.12.1rc1", "1.0.0", "dev"]) {
      const plan = planOutput(r, context(vllm(version)))
      expect(plan).toMatchObject({ toolMode: "text", constraint: "grammar", fields: { structured_outputs: { grammar } } })
    }
    for (const version of ["0.10.1", "0.9.2", "v0.8.5"]) {
      expect(planOutput(r, context(vllm(version))).fields).toEqual({ guided_grammar: grammar })
    }
  })

  it("takesStructuredOutputs reads x.y.z with suffixes", () => {
    expect(takesStructuredOutputs("0.10.2+cu128")).toBe(true)
    expect(takesStructuredOutputs("0.10.1.1")).toBe(false)
    expect(takesStructuredOutputs("0.10")).toBe(false)
  })
})

describe("planOutput: Ollama (a JSON Schema of the whole answer)", () => {
  const ajv = new Ajv2020({ strict: false })
  const schemaOf = (plan: OutputPlan) => {
    const format = plan.fields["response_format"] as { type: string; json_schema: { name: string; schema: object } }
    expect(format.type).toBe("json_schema")
    return ajv.compile(format.json_schema.schema)
  }

  it("one call (parallel_tool_calls false): the bare {name, arguments} object bare_json parses", () => {
    const plan = planOutput(request({ toolChoice: "required", parallelToolCalls: false }), context(ollama("0.12.3")))
    expect(plan).toMatchObject({ toolMode: "text", shape: "json_call", constraint: "json_schema" })
    const valid = schemaOf(plan)
    expect(valid({ name: "book_flight", arguments: VALID })).toBe(true)
    expect(valid({ name: "get_time", arguments: {} })).toBe(true)
    expect(valid({ name: "book_flight", arguments: { ...VALID, passengers: 0 } })).toBe(false)
    expect(valid({ name: "other", arguments: {} })).toBe(false)
    expect(valid({ name: "get_time", arguments: {}, extra: 1 })).toBe(false)
  })

  it("parallel calls allowed: llama.cpp's envelope {tool_calls: [...]}, 1 to 16 calls", () => {
    const plan = planOutput(request({ toolChoice: "required" }), context(ollama(undefined)))
    expect(plan.shape).toBe("json_calls")
    const valid = schemaOf(plan)
    expect(valid({ tool_calls: [{ name: "book_flight", arguments: VALID }, { name: "get_time", arguments: {} }] })).toBe(true)
    expect(valid({ tool_calls: [] })).toBe(false)
    expect(valid({ name: "get_time", arguments: {} })).toBe(false)
  })

  it("named (or a replay): that tool only", () => {
    for (const r of [request({ toolChoice: named("get_time") }), request({ replayTool: "get_time" })]) {
      const valid = schemaOf(planOutput(r, context(ollama(undefined))))
      expect(valid({ tool_calls: [{ name: "get_time", arguments: {} }] })).toBe(true)
      expect(valid({ tool_calls: [{ name: "book_flight", arguments: VALID }] })).toBe(false)
    }
  })

  it("the shape follows the model's formats; with neither bare shape, no constraint", () => {
    const only = (formats: ReadonlyArray<TextFormat>, parallel?: boolean) =>
      planOutput(request({ toolChoice: "required", ...(parallel !== undefined ? { parallelToolCalls: parallel } : {}) }), context(ollama(undefined), { toolFormats: formats }))
    expect(only(["bare_json"]).shape).toBe("json_call")
    expect(only(["llamacpp_envelope"], false).shape).toBe("json_calls")
    expect(only(["xml"])).toMatchObject({ toolMode: "native", constraint: "none" })
  })

  it("auto with a strict tool is left to validation (no schema says text or a call); a $ref is too", () => {
    expect(planOutput(request({ tools: [strictBook, time] }), context(ollama(undefined)))).toMatchObject({ toolMode: "native", constraint: "none" })
    const withRef: FunctionTool = {
      type: "function",
      function: { name: "r", parameters: { type: "object", properties: { a: { $ref: "#/$defs/a" } }, $defs: { a: { type: "string" } } } }
    }
    expect(planOutput(request({ tools: [withRef], toolChoice: "required" }), context(ollama(undefined))).constraint).toBe("none")
  })
})

describe("planOutput: the caller's constraint wins, an upstream that cannot constrain adds none", () => {
  it.each([
    ["a caller's grammar", { sampling: { constraints: { grammar: "root ::= \"x\"" } } }, {}],
    ["a caller's json_schema response_format", { sampling: { responseFormat: { type: "json_schema", json_schema: { schema: {} } } } }, {}],
    ["a grammar in extraBody", {}, { grammar: "root ::= \"x\"" }]
  ] as const)("%s: sent as it is, constraint none", (_name, fields, extraBody) => {
    const r = request({ toolChoice: "required", ...fields })
    for (const kind of [LLAMA_CPP, vllm(undefined), ollama(undefined)]) {
      expect(planOutput(r, context(kind, { extraBody }))).toEqual({ request: r, toolMode: "native", shape: "hermes", fields: {}, constraint: "none" })
    }
  })

  it("kind none: as it is", () => {
    const r = request({ toolChoice: "required" })
    expect(planOutput(r, context(NO_KIND))).toMatchObject({ request: r, toolMode: "native", constraint: "none" })
  })
})

describe("grammarCache", () => {
  it("compiles a request's tools once, answers the same grammar, and forgets the least recently used", () => {
    let compiled = 0
    const counting = (r: ToolCallGrammarRequest) => {
      compiled++
      return toolCallGrammar(r)
    }
    const cached = makeGrammarCache(2, counting)
    const a: ToolCallGrammarRequest = { tools: [book], toolChoice: "required" }
    const b: ToolCallGrammarRequest = { tools: [time], toolChoice: "required" }
    const c: ToolCallGrammarRequest = { tools: [book], toolChoice: "required", parallelToolCalls: false }
    expect(cached(a)).toEqual(toolCallGrammar(a))
    expect(cached({ tools: [book], toolChoice: "required" })).toEqual(toolCallGrammar(a))
    expect(compiled).toBe(1)
    cached(b)
    cached(a) // a is now the most recent
    cached(c) // evicts b
    expect(compiled).toBe(3)
    cached(a)
    expect(compiled).toBe(3)
    cached(b)
    expect(compiled).toBe(4)
  })
})
