import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import * as Either from "effect/Either"
import * as Encoding from "effect/Encoding"
import type { ChatCompletionRequest } from "../dialects/chat-completions/wire.js"
import type {
  ChatMessage,
  ContentPart,
  FunctionTool,
  JsonObject,
  MessageToolCall,
  ToolChoice
} from "../protocol/SubmitRunRequest.js"

/**
 * `@effect/ai`'s request → a Chat Completions wire request (pure): the prompt's messages, the toolkit's tools with
 * their JSON Schemas, the tool choice and the response format, over the layer's own fields. A `Left` says what of
 * the prompt the edge cannot take (a file it has no part for, a provider-defined tool).
 */

/** The request fields a `LanguageModel` layer sets for every call (sampling, limits, the upstream's own constraints). */
export type Config = Omit<
  ChatCompletionRequest,
  "model" | "messages" | "tools" | "tool_choice" | "stream" | "stream_options"
>

/** What of `LanguageModel.ProviderOptions` makes the request (the span is the layer's). */
export type Request = Pick<LanguageModel.ProviderOptions, "prompt" | "tools" | "toolChoice" | "responseFormat">

type Mapped<A> = Either.Either<A, string>

/** JSON text of a value a tool call or result carries; a value JSON cannot hold (a cycle, a bigint) is refused. */
const json = (value: unknown, what: string): Mapped<string> =>
  Either.mapLeft(
    Either.try(() => JSON.stringify(value ?? null) ?? "null"),
    () => `${what} cannot be written as JSON`
  )

const dataUrl = (part: Prompt.FilePart): string =>
  part.data instanceof URL
    ? part.data.toString()
    : part.data instanceof Uint8Array
    ? `data:${part.mediaType};base64,${Encoding.encodeBase64(part.data)}`
    // A string is a URL (remote or data) as given, else the file's bytes in base64.
    : /^(https?|data):/i.test(part.data)
    ? part.data
    : `data:${part.mediaType};base64,${part.data}`

/** A file as a Chat Completions content part: images and PDFs, as OpenAI's API takes them. */
const filePart = (part: Prompt.FilePart): Mapped<ContentPart> => {
  if (part.mediaType.startsWith("image/")) {
    return Either.right({ type: "image_url", image_url: { url: dataUrl(part) } })
  }
  if (part.mediaType === "application/pdf") {
    return Either.right({
      type: "file",
      file: { file_data: dataUrl(part), ...(part.fileName !== undefined ? { filename: part.fileName } : {}) }
    })
  }
  return Either.left(`a file of type '${part.mediaType}' has no Chat Completions part (images and PDFs do)`)
}

const userMessage = (message: Prompt.UserMessage): Mapped<ChatMessage> => {
  const [only, ...rest] = message.content
  if (only !== undefined && only.type === "text" && rest.length === 0) {
    return Either.right({ role: "user", content: only.text })
  }
  return Either.map(
    Either.all(message.content.map((part) =>
      part.type === "text" ? Either.right<ContentPart>({ type: "text", text: part.text }) : filePart(part)
    )),
    (content) => ({ role: "user", content })
  )
}

const toolMessage = (part: Prompt.ToolResultPart): Mapped<ChatMessage> =>
  Either.map(json(part.result, `the result of tool call ${part.id}`), (content) => ({
    role: "tool",
    tool_call_id: part.id,
    content
  }))

/**
 * An assistant turn: its text, its reasoning (as `reasoning_content`, which the edge passes on), its calls; the
 * results of calls it holds follow it as tool messages. What a provider executed itself is not the edge's to send.
 */
const assistantMessages = (message: Prompt.AssistantMessage): Mapped<ReadonlyArray<ChatMessage>> => {
  let text = ""
  let reasoning = ""
  const calls: Array<Mapped<MessageToolCall>> = []
  const results: Array<Prompt.ToolResultPart> = []
  for (const part of message.content) {
    switch (part.type) {
      case "text":
        text += part.text
        break
      case "reasoning":
        reasoning += part.text
        break
      case "tool-call":
        if (!part.providerExecuted) {
          calls.push(Either.map(json(part.params, `the parameters of tool call ${part.id}`), (args) => ({
            id: part.id,
            type: "function",
            function: { name: part.name, arguments: args }
          })))
        }
        break
      case "tool-result":
        if (!part.providerExecuted) results.push(part)
        break
      case "file":
        return Either.left("an assistant message's file has no Chat Completions part")
    }
  }
  return Either.flatMap(Either.all(calls), (toolCalls) =>
    Either.map(Either.all(results.map(toolMessage)), (tools): ReadonlyArray<ChatMessage> => [
      {
        role: "assistant",
        content: text === "" && toolCalls.length > 0 ? null : text,
        ...(reasoning !== "" ? { reasoning_content: reasoning } : {}),
        ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {})
      },
      ...tools
    ]))
}

const messages = (message: Prompt.Message): Mapped<ReadonlyArray<ChatMessage>> => {
  switch (message.role) {
    case "system":
      return Either.right([{ role: "system", content: message.content }])
    case "user":
      return Either.map(userMessage(message), (m) => [m])
    case "assistant":
      return assistantMessages(message)
    case "tool":
      return Either.all(message.content.map(toolMessage))
  }
}

/** A JSON Schema as the wire's JSON object (a schema is one). */
const schemaObject = (schema: object): JsonObject => ({ ...schema })

const functionTool = (tool: Tool.Any): Mapped<FunctionTool> => {
  if (Tool.isProviderDefined(tool)) {
    return Either.left(`the tool '${tool.name}' is defined by a provider (${tool.id}): the edge serves function tools`)
  }
  const description = tool.description ?? Tool.getDescriptionFromSchemaAst(tool.parametersSchema.ast)
  return Either.right({
    type: "function",
    function: {
      name: tool.name,
      ...(description !== undefined ? { description } : {}),
      parameters: schemaObject(Tool.getJsonSchemaFromSchemaAst(tool.parametersSchema.ast))
    }
  })
}

/** `oneOf` already narrowed the tools (LanguageModel does): what is left is whether one must be called. */
export const toolChoice = (choice: LanguageModel.ToolChoice<string>): ToolChoice => {
  if (typeof choice === "string") return choice
  if ("tool" in choice) return { type: "function", function: { name: choice.tool } }
  return choice.mode === "required" ? "required" : "auto"
}

const responseFormat = (format: Request["responseFormat"]): JsonObject | undefined =>
  format.type === "json"
    ? {
      type: "json_schema",
      json_schema: { name: format.objectName, schema: schemaObject(Tool.getJsonSchemaFromSchemaAst(format.schema.ast)) }
    }
    : undefined

/**
 * The wire request for `model`: `config`'s fields, the prompt's messages, the tools (with `tool_choice`) when
 * there are any, a JSON response format when `generateObject` asks for one (over `config`'s), and the usage asked
 * for when streamed.
 */
export const toWireRequest = (model: string, config: Config, request: Request): Mapped<ChatCompletionRequest> =>
  Either.flatMap(Either.all(request.prompt.content.map(messages)), (lists) =>
    Either.flatMap(Either.all(request.tools.map(functionTool)), (tools) => {
      const [first, ...rest] = lists.flat()
      if (first === undefined) return Either.left("the prompt has no messages")
      const format = responseFormat(request.responseFormat)
      return Either.right({
        ...config,
        model,
        messages: [first, ...rest],
        // The streamed answer's usage comes in a chunk of its own, after the finish chunk.
        stream_options: { include_usage: true },
        ...(tools.length > 0 ? { tools, tool_choice: toolChoice(request.toolChoice) } : {}),
        ...(format !== undefined ? { response_format: format } : {})
      })
    }))
