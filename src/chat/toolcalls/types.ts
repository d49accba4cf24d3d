/** Plain data shared by the tool-call parsers, the hold-back filter and validation. */

/** A tool of the request, reduced to what parsing and validation need. */
export interface RequestTool {
  readonly name: string
  readonly description?: string | undefined
  /** The tool's `parameters` JSON Schema (draft 2020-12 or draft-07), if any. */
  readonly parameters?: Readonly<Record<string, unknown>> | undefined
}

/** A tool call parsed out of text or normalised from a native call; `arguments` is JSON text. */
export interface ParsedToolCall {
  readonly name: string
  readonly arguments: string
}

/** A tool call as the response carries it. */
export interface ToolCall {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

export { TEXT_FORMATS, type TextFormat } from "../../protocol/ModelOptions.js"

/**
 * The request's `tool_choice`, decoded. `allowedTools`: the request's tools are the caller's allow-list (Responses
 * `allowed_tools` in `auto` mode), so a call to any other tool is refused.
 */
export type ToolChoiceMode =
  | { readonly _tag: "Auto"; readonly allowedTools?: true }
  | { readonly _tag: "None" }
  | { readonly _tag: "Required" }
  | { readonly _tag: "Function"; readonly name: string }
