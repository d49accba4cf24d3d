import * as Either from "effect/Either"
import { buildChatRequest, type ChatRequestLimits, type DialectRequest } from "../../chat/buildChatRequest.js"
import type { ModelOptions } from "../../config/EdgeConfig.js"
import { clip } from "../../common/clip.js"
import { InvalidRequest } from "../../chat/EdgeError.js"
import { decodeValue, parseBody } from "../jsonBody.js"
import type { FunctionTool, JsonObject, SamplingParams, ToolChoice } from "../../protocol/SubmitRunRequest.js"
import { toChatMessages } from "./input.js"
import {
  type ContentPart,
  CustomToolCallItem,
  CustomToolCallOutputItem,
  FunctionCallItem,
  ItemReference,
  FunctionCallOutputItem,
  FunctionToolWire,
  type InputItem,
  MessageItem,
  type RawItem,
  ReasoningItem,
  type ResponsesRequest,
  ResponsesRequestWire,
  type TextFormat,
  ToolChoiceAllowed,
  ToolChoiceFunction,
  type ToolItem,
  type Typed
} from "./wire.js"

/**
 * The Responses request: decoded (every error names its field in a few hundred characters, never quoting a value),
 * then translated into the chat plane's request (Chat Completions messages and tools). `previous_response_id` and
 * `item_reference` items are resolved between the two from the response store (`StoredResponses.resolve`); a
 * request that did not go through it has them refused. Refused with a 400 naming the field: what needs state the
 * edge does not keep (`conversation`, `prompt`, `background`, `file_id`s) and token log probabilities (not relayed
 * yet).
 */

const fail = (message: string, param: string | null) => Either.left(new InvalidRequest({ message, param }))

const decodeWire = decodeValue(ResponsesRequestWire)
const decodeMessage = decodeValue(MessageItem)
const decodeFunctionCall = decodeValue(FunctionCallItem)
const decodeFunctionCallOutput = decodeValue(FunctionCallOutputItem)
const decodeCustomToolCall = decodeValue(CustomToolCallItem)
const decodeCustomToolCallOutput = decodeValue(CustomToolCallOutputItem)
const decodeReasoning = decodeValue(ReasoningItem)
const decodeReference = decodeValue(ItemReference)
const decodeFunctionTool = decodeValue(FunctionToolWire)
const decodeChoiceFunction = decodeValue(ToolChoiceFunction)
const decodeChoiceAllowed = decodeValue(ToolChoiceAllowed)

const NOT_RESOLVED = "stored responses are not available here: send the whole conversation in input"

/** A part the edge cannot pass on (it points at stored files), refused with its path. */
const partRefusal = (part: ContentPart, path: string): Either.Either<void, InvalidRequest> => {
  switch (part.type) {
    case "input_image":
      if (part.file_id != null) {
        return fail(`${path}.file_id: this edge has no Files API: send the image as image_url (a URL or a data: URL)`, `${path}.file_id`)
      }
      if (part.image_url == null) return fail(`${path}.image_url: missing (required)`, `${path}.image_url`)
      return Either.void
    case "input_file":
      if (part.file_id != null || part.file_url != null) {
        const field = part.file_id != null ? "file_id" : "file_url"
        return fail(`${path}.${field}: this edge has no Files API and fetches no files: send the file as file_data`, `${path}.${field}`)
      }
      if (part.file_data == null) return fail(`${path}.file_data: missing (required)`, `${path}.file_data`)
      return Either.void
    case "input_text":
    case "output_text":
    case "refusal":
      return Either.void
  }
}

const checkParts = (content: string | ReadonlyArray<ContentPart>, path: string): Either.Either<void, InvalidRequest> => {
  if (typeof content === "string") return Either.void
  for (const [j, part] of content.entries()) {
    const refused = partRefusal(part, `${path}[${j}]`)
    if (Either.isLeft(refused)) return refused
  }
  return Either.void
}

const withParts = <A>(checked: Either.Either<void, InvalidRequest>, value: A): Either.Either<A, InvalidRequest> =>
  Either.map(checked, () => value)

/** An item's type: without one it is a message, or a reference when it has an id and no role (OpenAI's shapes). */
export const itemType = (raw: RawItem): string => {
  if (typeof raw["type"] === "string") return raw["type"]
  return raw["role"] === undefined && raw["id"] !== undefined ? "item_reference" : "message"
}

/** One input item, decoded by the schema of its type, its errors named under `root` (`input[3]`). */
export const decodeItem = (raw: RawItem, root: string): Either.Either<InputItem, InvalidRequest> => {
  const type = itemType(raw)
  switch (type) {
    case "message":
      return Either.flatMap(decodeMessage(raw, root), (item) =>
        withParts(checkParts(item.content, `${root}.content`), { _tag: "Message", item } as const))
    case "function_call":
      return Either.map(decodeFunctionCall(raw, root), (item) => ({ _tag: "FunctionCall", item } as const))
    case "function_call_output":
      return Either.flatMap(decodeFunctionCallOutput(raw, root), (item) =>
        withParts(checkParts(item.output, `${root}.output`), { _tag: "FunctionCallOutput", item } as const))
    case "custom_tool_call":
      return Either.map(decodeCustomToolCall(raw, root), (item) => ({ _tag: "CustomToolCall", item } as const))
    case "custom_tool_call_output":
      return Either.flatMap(decodeCustomToolCallOutput(raw, root), (item) =>
        withParts(checkParts(item.output, `${root}.output`), { _tag: "CustomToolCallOutput", item } as const))
    case "reasoning":
      return Either.map(decodeReasoning(raw, root), (item) => ({ _tag: "Reasoning", item } as const))
    case "item_reference":
      return Either.map(decodeReference(raw, root), (item) => ({ _tag: "Reference", id: item.id } as const))
    default:
      return Either.right({ _tag: "Other", type: clip(type, 64) })
  }
}

const decodeTool = (raw: Typed, i: number): Either.Either<ToolItem, InvalidRequest> =>
  raw.type === "function"
    ? Either.map(decodeFunctionTool(raw, `tools[${i}]`), (tool) => ({ _tag: "Function", tool } as const))
    : Either.right({ _tag: "Other", type: clip(raw.type, 64) })

/** Fields that need state the edge does not keep, or log probabilities: a 400 naming the field. */
const refusal = (wire: ResponsesRequestWire): InvalidRequest | undefined => {
  const refuse = (param: string, why: string) => new InvalidRequest({ message: `${param}: ${why}`, param })
  if (wire.conversation != null) {
    return refuse("conversation", "this edge keeps no conversations: continue one with previous_response_id, or send the whole conversation in input")
  }
  if (wire.prompt != null) return refuse("prompt", "this edge stores no prompt templates: send instructions and input instead")
  if (wire.background === true) return refuse("background", "this edge runs no background responses: leave background unset or false")
  if ((wire.top_logprobs ?? 0) > 0) return refuse("top_logprobs", "token log probabilities are not relayed by this edge yet: leave top_logprobs unset or 0")
  if (wire.include?.includes("message.output_text.logprobs") === true) {
    return refuse("include", "token log probabilities are not relayed by this edge yet: leave message.output_text.logprobs out of include")
  }
  return undefined
}

const all = <A, B>(items: ReadonlyArray<A>, f: (a: A, i: number) => Either.Either<B, InvalidRequest>) => {
  const out: Array<B> = []
  for (const [i, a] of items.entries()) {
    const b = f(a, i)
    if (Either.isLeft(b)) return Either.left(b.left)
    out.push(b.right)
  }
  return Either.right(out)
}

/** Parses and decodes the body; an error names the offending field in a few hundred characters, never quoting its value. */
export const decodeBody = (text: string): Either.Either<ResponsesRequest, InvalidRequest> =>
  Either.gen(function* () {
    const json = yield* parseBody(text)
    const wire = yield* decodeWire(json, "")
    const refused = refusal(wire)
    if (refused !== undefined) return yield* Either.left(refused)
    // A string input is one user message.
    if (typeof wire.input === "string") {
      const text = wire.input
      const tools = yield* all(wire.tools ?? [], decodeTool)
      const rawInput = [{ type: "message", role: "user", content: [{ type: "input_text", text }] }]
      return { ...wire, input: [{ _tag: "Message", item: { role: "user", content: text } }], rawInput, tools }
    }
    const input = yield* all(wire.input, (raw, i) => decodeItem(raw, `input[${i}]`))
    const tools = yield* all(wire.tools ?? [], decodeTool)
    return { ...wire, input, rawInput: wire.input, tools }
  })

// ---------------------------------------------------------------------------
// translation

const chatTool = (t: FunctionToolWire): FunctionTool => ({
  type: "function",
  function: {
    name: t.name,
    ...(t.description != null ? { description: t.description } : {}),
    ...(t.parameters != null ? { parameters: t.parameters } : {}),
    ...(t.strict != null ? { strict: t.strict } : {})
  }
})

interface ChosenTools {
  readonly tools: ReadonlyArray<FunctionTool>
  /** Each forwarded tool's index in the caller's `tools`, for error messages. */
  readonly indices: ReadonlyArray<number>
  readonly choice: ToolChoice | undefined
  /** `allowed_tools`: the tools kept are the only ones a call may name. */
  readonly allowed: boolean
}

/**
 * The function tools and the tool choice. `allowed_tools` narrows the tools to the functions it lists; a choice
 * that forces a tool type the edge does not forward is refused (the model could never satisfy it).
 */
const chooseTools = (wire: ResponsesRequest): Either.Either<ChosenTools, InvalidRequest> => {
  const functions: Array<{ readonly tool: FunctionToolWire; readonly index: number }> = []
  for (const [index, t] of wire.tools.entries()) if (t._tag === "Function") functions.push({ tool: t.tool, index })
  const pick = (allowed: ((name: string) => boolean) | undefined, choice: ToolChoice | undefined): ChosenTools => {
    const kept = allowed === undefined ? functions : functions.filter((f) => allowed(f.tool.name))
    return { tools: kept.map((f) => chatTool(f.tool)), indices: kept.map((f) => f.index), choice, allowed: allowed !== undefined }
  }
  const choice = wire.tool_choice
  if (choice == null) return Either.right(pick(undefined, undefined))
  if (typeof choice === "string") return Either.right(pick(undefined, choice))
  switch (choice.type) {
    case "function":
      return Either.map(decodeChoiceFunction(choice, "tool_choice"), (c) =>
        pick(undefined, { type: "function", function: { name: c.name } }))
    case "allowed_tools":
      return Either.map(decodeChoiceAllowed(choice, "tool_choice"), (c) => {
        const names = new Set(c.tools.flatMap((t) => (t.type === "function" && typeof t.name === "string" ? [t.name] : [])))
        return pick((name) => names.has(name), c.mode)
      })
    default:
      return fail(
        `tool_choice: forces a ${JSON.stringify(clip(choice.type, 40))} tool, which this edge does not forward (only function tools are run): use "auto", "required" or a function`,
        "tool_choice"
      )
  }
}

/** `text.format` in Chat Completions' `response_format` shape. */
const responseFormat = (format: TextFormat | null | undefined): JsonObject | undefined => {
  if (format == null || format.type === "text") return undefined
  if (format.type === "json_object") return { type: "json_object" }
  return {
    type: "json_schema",
    json_schema: {
      name: format.name,
      schema: format.schema,
      ...(format.description != null ? { description: format.description } : {}),
      ...(format.strict != null ? { strict: format.strict } : {})
    }
  }
}

const defined = <T>(value: T | null | undefined): T | undefined => (value === null ? undefined : value)

/** The types of what is not forwarded, for the request's one debug line (`not_forwarded_tools`, `not_forwarded_input`). */
const notForwarded = (wire: ResponsesRequest): Readonly<Record<string, string>> => {
  const types = (items: ReadonlyArray<InputItem | ToolItem>) =>
    Array.from(new Set(items.flatMap((i) => (i._tag === "Other" ? [i.type] : [])))).sort().join(",")
  const tools = types(wire.tools)
  const input = types(wire.input)
  return { ...(tools !== "" ? { tools } : {}), ...(input !== "" ? { input } : {}) }
}

/** A Responses request, its model resolved, as the chat plane's request. */
export const toChatRequest = (
  wire: ResponsesRequest,
  model: ModelOptions,
  limits: ChatRequestLimits
): Either.Either<DialectRequest, InvalidRequest> =>
  Either.gen(function* () {
    if (wire.stored === undefined) {
      if (wire.previous_response_id != null) return yield* fail(`previous_response_id: ${NOT_RESOLVED}`, "previous_response_id")
      const at = wire.input.findIndex((item) => item._tag === "Reference")
      if (at >= 0) return yield* fail(`input[${at}]: an item_reference points at a stored item; ${NOT_RESOLVED}`, `input[${at}]`)
    }
    const messages = toChatMessages(wire.instructions ?? undefined, wire.input)
    if (messages.length === 0) return yield* fail("input: there is no message to answer", "input")
    const chosen = yield* chooseTools(wire)
    const summary = wire.reasoning?.summary ?? wire.reasoning?.generate_summary
    const sampling: SamplingParams = {
      temperature: defined(wire.temperature),
      topP: defined(wire.top_p),
      maxTokens: defined(wire.max_output_tokens),
      // `max_output_tokens` counts reasoning too, as `max_completion_tokens` does (and OpenAI's reasoning models take only it).
      ...(wire.max_output_tokens != null ? { maxTokensField: "max_completion_tokens" as const } : {}),
      responseFormat: responseFormat(wire.text?.format),
      reasoningEffort: defined(wire.reasoning?.effort),
      user: defined(wire.user)
    }
    const ignored = notForwarded(wire)
    return yield* buildChatRequest({
      api: "responses",
      model,
      messages,
      tools: chosen.tools,
      toolChoice: chosen.choice,
      ...(chosen.allowed ? { allowedTools: true } : {}),
      parallelToolCalls: defined(wire.parallel_tool_calls),
      sampling,
      metadata: wire.metadata ?? {},
      stream: wire.stream === true,
      // `response.completed` always carries usage.
      includeUsage: true,
      // A summary asked for shows reasoning (even on a strict model); without one, the model's default applies.
      reasoning: { includeReasoning: summary != null ? true : undefined },
      ...(Object.keys(ignored).length > 0 ? { notForwarded: ignored } : {}),
      params: {
        toolSchema: (i) => `tools[${chosen.indices[i] ?? i}].parameters`,
        toolChoice: "tool_choice"
      }
    }, limits)
  })
