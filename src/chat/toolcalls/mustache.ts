/** `{{tool_call}}{"name": ..., "arguments": {...}}{{/tool_call}}`, JSON between mustache tags. */
import type { TagFormat } from "./block.js"
import { parseJsonCalls } from "./json.js"

export const mustache: TagFormat = {
  format: "mustache",
  open: "{{tool_call}}",
  close: "{{/tool_call}}",
  committed: "{{tool_call".length,
  claims: () => true,
  parse: (body) => parseJsonCalls(body, "{{tool_call}}")
}
