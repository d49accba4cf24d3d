import * as Either from "effect/Either"
import type {
  ChatMessage,
  ContentPart,
  FunctionTool,
  MessageContent,
  SubmitRunRequest,
  ToolChoice
} from "../../protocol/SubmitRunRequest.js"
import type { ToolMode } from "../../protocol/ModelOptions.js"
import type { AnswerShape } from "./outputConstraint.js"

/**
 * `SubmitRunRequest` → the JSON body of `POST {baseUrl}/chat/completions`.
 * Native mode passes tools on; text mode describes them in the system prompt
 * (Hermes style, the format most open models were trained on) and rewrites
 * the tool turns of the history into the same markup.
 */

export interface UpstreamRequestOptions {
  readonly upstreamModel: string
  readonly toolMode: ToolMode
  /** The configured `extraBody`: under the request's own fields. */
  readonly extraBody?: Readonly<Record<string, unknown>>
  /** The answer's constraint (`outputConstraint.ts`): its fields, and the shape of calls the prompt teaches. */
  readonly constraint?: { readonly fields: Readonly<Record<string, unknown>>; readonly shape: AnswerShape }
}

type Json = Record<string, unknown>

const defined = (fields: Json): Json => {
  const out: Json = {}
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) out[key] = value
  return out
}

export const toUpstreamBody = (request: SubmitRunRequest, options: UpstreamRequestOptions): Json => {
  const s = request.sampling
  const tools = options.toolMode === "native" && request.tools.length > 0 ? request.tools.map(toolJson) : undefined
  const own = defined({
    model: options.upstreamModel,
    messages: options.toolMode === "native"
      ? request.messages.map(messageJson)
      : textModeMessages(request, options.constraint?.shape ?? "hermes"),
    // A whole answer (JSON) when the caller takes it whole: cheaper to read, and its usage comes with it.
    stream: request.wholeAnswer !== true,
    stream_options: request.wholeAnswer === true ? undefined : { include_usage: true },
    temperature: s.temperature,
    top_p: s.topP,
    // The caller's field name: OpenAI's reasoning models take only `max_completion_tokens`.
    max_tokens: s.maxTokensField === "max_completion_tokens" ? undefined : s.maxTokens,
    max_completion_tokens: s.maxTokensField === "max_completion_tokens" ? s.maxTokens : undefined,
    stop: s.stop,
    seed: s.seed,
    presence_penalty: s.presencePenalty,
    frequency_penalty: s.frequencyPenalty,
    response_format: s.responseFormat,
    reasoning_effort: s.reasoningEffort,
    user: s.user,
    logit_bias: s.logitBias,
    logprobs: s.logprobs,
    top_logprobs: s.topLogprobs,
    tools,
    // Without tools, tool_choice / parallel_tool_calls make some servers (OpenAI, vLLM) reject the request.
    tool_choice: tools !== undefined ? request.toolChoice : undefined,
    parallel_tool_calls: tools !== undefined ? request.parallelToolCalls : undefined
  })
  // The edge's constraint is only compiled when neither the caller nor extraBody sends one; none over the request's own.
  return { ...options.extraBody, ...options.constraint?.fields, ...s.constraints, ...own }
}

const toolJson = (tool: FunctionTool): Json => ({
  type: "function",
  function: defined({
    name: tool.function.name,
    description: tool.function.description,
    parameters: tool.function.parameters,
    strict: tool.function.strict ?? undefined
  })
})

const messageJson = (message: ChatMessage): Json =>
  defined({
    role: message.role,
    content: message.content,
    name: message.name,
    // OpenAI requires `type` on history tool calls; the request may have left it out.
    tool_calls: message.tool_calls?.map((call) => ({
      id: call.id,
      type: "function",
      function: { name: call.function.name, arguments: call.function.arguments }
    })),
    tool_call_id: message.tool_call_id,
    reasoning_content: message.reasoning_content
  })

// ---------------------------------------------------------------------------
// text mode

const contentAsText = (content: MessageContent | undefined): string => {
  if (content === undefined || content === null) return ""
  if (typeof content === "string") return content
  return content
    .map((part) => (part.type === "text" && typeof part.text === "string" ? part.text : ""))
    .filter((text) => text !== "")
    .join("\n")
}

const appendText = (content: MessageContent | undefined, text: string): MessageContent => {
  if (content === undefined || content === null || content === "") return text
  if (typeof content === "string") return `${content}\n\n${text}`
  const part: ContentPart = { type: "text", text }
  return [...content, part]
}

const choiceInstruction = (choice: ToolChoice | undefined, parallel: boolean | undefined): ReadonlyArray<string> => {
  const lines: Array<string> = []
  if (choice === "required") lines.push("You must call at least one function in this answer.")
  else if (typeof choice === "object") {
    lines.push(`You must call the function "${choice.function.name}" in this answer.`)
  }
  if (parallel === false) lines.push("Call at most one function per answer.")
  return lines
}

/** How a call is written, as the prompt teaches it: the Hermes markup, or bare JSON (a JSON-constrained answer). */
const callInstruction = (shape: AnswerShape): ReadonlyArray<string> => {
  switch (shape) {
    case "hermes":
      return [
        "For each function call, return a json object with the function name and arguments within " +
        "<tool_call></tool_call> XML tags:",
        "<tool_call>",
        "{\"name\": <function-name>, \"arguments\": <args-json-object>}",
        "</tool_call>"
      ]
    case "json_call":
      return [
        "To call a function, answer with nothing but a json object with the function name and arguments:",
        "{\"name\": <function-name>, \"arguments\": <args-json-object>}"
      ]
    case "json_calls":
      return [
        "To call functions, answer with nothing but a json object listing the calls:",
        "{\"tool_calls\": [{\"name\": <function-name>, \"arguments\": <args-json-object>}, ...]}"
      ]
  }
}

/** The tools part of the system prompt, or `undefined` when no tools are on offer. */
export const toolsPrompt = (request: SubmitRunRequest, shape: AnswerShape = "hermes"): string | undefined => {
  const choice = request.toolChoice
  if (request.tools.length === 0 || choice === "none") return undefined
  // A forced function: describe only that one (all of them if the request names an unknown one).
  const chosen = typeof choice === "object" ? request.tools.filter((t) => t.function.name === choice.function.name) : []
  const tools = chosen.length > 0 ? chosen : request.tools
  return [
    "# Tools",
    "",
    "You may call one or more functions to assist with the user query.",
    "",
    "You are provided with function signatures within <tools></tools> XML tags:",
    "<tools>",
    ...tools.map((tool) => JSON.stringify(toolJson(tool))),
    "</tools>",
    "",
    ...callInstruction(shape),
    ...choiceInstruction(choice, request.parallelToolCalls)
  ].join("\n")
}

// Arguments that are not JSON are embedded as the string they are.
const parseArguments = (text: string): unknown =>
  Either.getOrElse(Either.try((): unknown => JSON.parse(text)), () => text)

export const toolCallMarkup = (name: string, args: string): string =>
  `<tool_call>\n${JSON.stringify({ name, arguments: parseArguments(args) })}\n</tool_call>`

const toolResponseMarkup = (message: ChatMessage): string =>
  `<tool_response>\n${contentAsText(message.content)}\n</tool_response>`

const textModeMessages = (request: SubmitRunRequest, shape: AnswerShape): ReadonlyArray<Json> => {
  const out: Array<Json> = []
  let toolResponses: Array<string> = []
  const flushToolResponses = () => {
    if (toolResponses.length > 0) out.push({ role: "user", content: toolResponses.join("\n") })
    toolResponses = []
  }
  for (const message of request.messages) {
    if (message.role === "tool") {
      toolResponses.push(toolResponseMarkup(message))
      continue
    }
    flushToolResponses()
    if (message.role === "assistant" && message.tool_calls !== undefined && message.tool_calls.length > 0) {
      const calls = message.tool_calls.map((call) => toolCallMarkup(call.function.name, call.function.arguments))
      const text = contentAsText(message.content)
      out.push(defined({
        role: "assistant",
        content: [text, ...calls].filter((part) => part !== "").join("\n"),
        name: message.name,
        reasoning_content: message.reasoning_content
      }))
      continue
    }
    out.push(messageJson(message))
  }
  flushToolResponses()
  const prompt = toolsPrompt(request, shape)
  if (prompt === undefined) return out
  const first = out[0]
  const firstMessage = request.messages[0]
  if (first !== undefined && firstMessage !== undefined && firstMessage.role === "system") {
    return [{ ...first, content: appendText(firstMessage.content, prompt) }, ...out.slice(1)]
  }
  return [{ role: "system", content: prompt }, ...out]
}
