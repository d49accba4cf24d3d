/**
 * Run as a child process by validate.memory.test.ts (bundled, under a small heap): validates one call against each
 * of COUNT distinct strict schemas (each with a constant of SIZE characters, which ajv inlines into the code it
 * generates), then prints what the validator cache holds as one JSON line.
 */
import type { RequestTool } from "../../../src/chat/toolcalls/types.js"
import { validatorCacheStats, validateToolCalls } from "../../../src/chat/toolcalls/validate.js"

const count = Number(process.env["COUNT"] ?? "10000")
const size = Number(process.env["SIZE"] ?? "8000")
let invalid = 0
for (let i = 0; i < count; i++) {
  const note = `${i}:${"x".repeat(size)}`
  const tool: RequestTool = {
    name: "t",
    parameters: { type: "object", properties: { id: { const: i }, note: { const: note } }, required: ["id"] }
  }
  const verdict = validateToolCalls([{ name: "t", arguments: JSON.stringify({ id: i, note }) }], [tool], {
    _tag: "Auto"
  })
  if (verdict._tag === "Invalid") invalid++
}
const { heapUsed } = process.memoryUsage()
process.stdout.write(`${JSON.stringify({ invalid, heapUsed, ...validatorCacheStats() })}\n`)
