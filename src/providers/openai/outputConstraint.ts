/**
 * How one request's answer is constrained at its upstream, by the upstream's kind — pure. A request needs a
 * constraint when it has tools, `tool_choice` is not `none`, and it must call one (`required`, named, a constrained
 * replay's tool) or is strict (a strict model, a tool with `strict: true`):
 *
 * - llama.cpp: `grammar`, the GBNF of the Hermes markup the text-mode prompt teaches, each tool's arguments by its
 *   schema (`toolCallGrammar`);
 * - vLLM: the same GBNF as `structured_outputs: {grammar}` (0.10.2 on, or version unknown), else `guided_grammar`;
 * - Ollama: only when the answer must be a call, `response_format` with the JSON Schema of the whole answer as bare
 *   JSON (`{"name", "arguments"}`, or `{"tool_calls": [...]}` when parallel calls are allowed), which Ollama turns
 *   into its `format`; a strict request under `auto` is left to validation (a schema cannot say "text, or a call").
 *
 * A constrained request is sent in text mode (the edge's prompt and the constraint), native mode or not: llama.cpp
 * refuses `grammar` beside `tools`, and native parsers ignore `required` and named choices. Only when the model
 * parses the shape the constraint forces (`xml` for Hermes markup, `bare_json` / `llamacpp_envelope` for JSON);
 * otherwise, and when the caller (or the model's `extraBody`) sends a constraint of its own, the request goes as
 * it is, constraint `none`.
 */
import type { TextFormat, ToolMode } from "../../protocol/ModelOptions.js"
import type { OutputConstraint } from "../../protocol/RunEvent.js"
import { type FunctionTool, type SubmitRunRequest, type ToolChoice, UPSTREAM_CONSTRAINTS } from "../../protocol/SubmitRunRequest.js"
import {
  argumentsSchema,
  MAX_CALLS,
  toolCallGrammar,
  type ToolCallGrammar,
  type ToolCallGrammarRequest
} from "../constraints/toolCallGrammar.js"
import { takesStructuredOutputs, type UpstreamKind } from "./upstreamKind.js"

/** How the answer's calls are written: the Hermes markup, one bare JSON call, or llama.cpp's `{"tool_calls": [...]}`. */
export type AnswerShape = "hermes" | "json_call" | "json_calls"

export interface OutputPlan {
  /** The request as sent: a constrained replay's `tool_choice` names the replayed tool. */
  readonly request: SubmitRunRequest
  readonly toolMode: ToolMode
  readonly shape: AnswerShape
  /** Added to the upstream body, under the request's own fields. */
  readonly fields: Readonly<Record<string, unknown>>
  readonly constraint: OutputConstraint
}

export interface PlanContext {
  readonly kind: UpstreamKind
  /** The model's tool mode and text formats, and whether it is strict. */
  readonly toolMode: ToolMode
  readonly toolFormats: ReadonlyArray<TextFormat>
  readonly strictModel: boolean
  readonly extraBody?: Readonly<Record<string, unknown>> | undefined
  /** `toolCallGrammar`, or a cache of it. */
  readonly grammarOf?: (request: ToolCallGrammarRequest) => ToolCallGrammar
}

const mustCall = (choice: ToolChoice | undefined): boolean => choice === "required" || typeof choice === "object"

/** The request has tools it must call, or strict ones: a constraint would help. */
export const needsConstraint = (request: SubmitRunRequest, strictModel: boolean): boolean =>
  request.tools.length > 0 && request.toolChoice !== "none" &&
  (request.replayTool !== undefined || mustCall(request.toolChoice) || strictModel ||
    request.tools.some((t) => t.function.strict === true))

// The caller's own upstream constraint fields (`guided_decoding_backend` picks a backend, it constrains nothing),
// and `response_format` (in `extraBody`: the request's own is looked at by its type).
const CONSTRAINT_FIELDS: ReadonlySet<string> = new Set<string>([
  ...UPSTREAM_CONSTRAINTS.filter((field) => field !== "guided_decoding_backend"),
  "response_format"
])

const constrains = (fields: Readonly<Record<string, unknown>> | undefined): boolean =>
  fields !== undefined && Object.keys(fields).some((key) => CONSTRAINT_FIELDS.has(key))

/** The caller sent a constraint of its own (or the model's `extraBody` does): the edge adds none beside it. */
export const ownConstraint = (request: SubmitRunRequest, extraBody?: Readonly<Record<string, unknown>>): boolean => {
  const format = request.sampling.responseFormat?.["type"]
  return constrains(request.sampling.constraints) || format === "json_schema" || format === "json_object" ||
    constrains(extraBody)
}

/** Whether the upstream's kind matters to this request (else it is sent as it is, and no kind is asked for). */
export const wantsConstraint = (
  request: SubmitRunRequest,
  strictModel: boolean,
  extraBody?: Readonly<Record<string, unknown>>
): boolean => needsConstraint(request, strictModel) && !ownConstraint(request, extraBody)

interface Compiled {
  readonly shape: AnswerShape
  readonly fields: Readonly<Record<string, unknown>>
  readonly constraint: OutputConstraint
}

const hermesGrammar = (request: SubmitRunRequest, ctx: PlanContext): string | undefined => {
  if (!ctx.toolFormats.includes("xml")) return undefined
  const compiled = (ctx.grammarOf ?? toolCallGrammar)({
    tools: request.tools,
    toolChoice: request.toolChoice,
    parallelToolCalls: request.parallelToolCalls
  })
  return compiled._tag === "Grammar" ? compiled.grammar : undefined
}

/** The tools a call may name: the named one, or all; one per name (the first, as validation finds it). */
const allowedTools = (request: SubmitRunRequest): ReadonlyArray<FunctionTool> => {
  const choice = request.toolChoice
  const seen = new Set<string>()
  return request.tools.filter((tool) => {
    const name = tool.function.name
    if (seen.has(name) || (typeof choice === "object" && choice.function.name !== name)) return false
    seen.add(name)
    return true
  })
}

// A `$ref` points into its tool's own schema; nested under the answer's schema it would point elsewhere.
const hasRef = (value: unknown): boolean =>
  typeof value === "object" && value !== null &&
  (Array.isArray(value) ? value.some(hasRef) : Object.entries(value).some(([k, v]) => k === "$ref" || hasRef(v)))

const callSchema = (tool: FunctionTool): Record<string, unknown> => ({
  type: "object",
  properties: {
    name: { const: tool.function.name },
    arguments: tool.function.parameters === undefined ? { type: "object" } : argumentsSchema(tool.function.parameters)
  },
  required: ["name", "arguments"],
  additionalProperties: false
})

/** Ollama: the JSON Schema of an answer that is the calls and nothing else, in a shape the model's formats parse. */
const answerSchema = (request: SubmitRunRequest, formats: ReadonlyArray<TextFormat>): Compiled | undefined => {
  if (!mustCall(request.toolChoice)) return undefined
  const tools = allowedTools(request)
  if (tools.length === 0 || tools.some((t) => hasRef(t.function.parameters))) return undefined
  const single = formats.includes("bare_json")
  const envelope = formats.includes("llamacpp_envelope")
  // One call is the bare object; more need the envelope (bare_json reads one object only).
  const shape: AnswerShape | undefined = request.parallelToolCalls === false
    ? single ? "json_call" : envelope ? "json_calls" : undefined
    : envelope ? "json_calls" : single ? "json_call" : undefined
  if (shape === undefined) return undefined
  const calls = tools.map(callSchema)
  const call = calls.length === 1 ? calls[0] : { anyOf: calls }
  const schema = shape === "json_call" ? call : {
    type: "object",
    properties: {
      tool_calls: { type: "array", items: call, minItems: 1, maxItems: request.parallelToolCalls === false ? 1 : MAX_CALLS }
    },
    required: ["tool_calls"],
    additionalProperties: false
  }
  return {
    shape,
    constraint: "json_schema",
    fields: { response_format: { type: "json_schema", json_schema: { name: shape === "json_call" ? "tool_call" : "tool_calls", schema } } }
  }
}

const compile = (request: SubmitRunRequest, ctx: PlanContext): Compiled | undefined => {
  const kind = ctx.kind
  switch (kind._tag) {
    case "LlamaCpp": {
      const grammar = hermesGrammar(request, ctx)
      return grammar === undefined ? undefined : { shape: "hermes", constraint: "grammar", fields: { grammar } }
    }
    case "Vllm": {
      const grammar = hermesGrammar(request, ctx)
      if (grammar === undefined) return undefined
      const fields = takesStructuredOutputs(kind.version) ? { structured_outputs: { grammar } } : { guided_grammar: grammar }
      return { shape: "hermes", constraint: "grammar", fields }
    }
    case "Ollama":
      return answerSchema(request, ctx.toolFormats)
    case "None":
      return undefined
  }
}

const NO_FIELDS: Readonly<Record<string, unknown>> = {}

/** The request as sent to its upstream: in which tool mode, with which constraint. */
export const planOutput = (request: SubmitRunRequest, ctx: PlanContext): OutputPlan => {
  const asItIs: OutputPlan = { request, toolMode: ctx.toolMode, shape: "hermes", fields: NO_FIELDS, constraint: "none" }
  if (!wantsConstraint(request, ctx.strictModel, ctx.extraBody)) return asItIs
  // A constrained replay allows only a call of the tool whose call was invalid.
  const sent: SubmitRunRequest = request.replayTool === undefined
    ? request
    : { ...request, toolChoice: { type: "function", function: { name: request.replayTool } } }
  const compiled = compile(sent, ctx)
  return compiled === undefined ? asItIs : { request: sent, toolMode: "text", ...compiled }
}
