#!/usr/bin/env node
// A minimal Chat Completions "agent", the harness's own baseline (cases chat-native / chat-markup of run-case.sh):
// offers one shell tool, streams, runs the call it gets with /bin/sh, sends the result back, prints the final text.
// It exercises the fake upstream, the edge and the namespace without a real agent or a new dialect.
//   CHAT_BASE_URL=http://127.0.0.1:8080/v1 CHAT_API_KEY=… CHAT_MODEL=… node chat-agent.mjs "prompt"
import { execFileSync } from "node:child_process"

const base = process.env.CHAT_BASE_URL ?? "http://127.0.0.1:8080/v1"
const model = process.env.CHAT_MODEL ?? "local-coder"
const prompt = process.argv[2] ?? "Run echo hi"
const tools = [
  {
    type: "function",
    function: {
      name: "exec_command",
      description: "Runs a shell command and returns its output.",
      parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"], additionalProperties: false }
    }
  }
]

async function turn(messages) {
  const res = await fetch(`${base}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${process.env.CHAT_API_KEY ?? ""}` },
    body: JSON.stringify({ model, stream: true, messages, tools }),
    signal: AbortSignal.timeout(30_000)
  })
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`)
  let content = ""
  const calls = []
  const text = await res.text()
  for (const line of text.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue
    const chunk = JSON.parse(line.slice(6))
    if (chunk.error) throw new Error(`stream error: ${JSON.stringify(chunk.error)}`)
    const delta = chunk.choices?.[0]?.delta ?? {}
    if (delta.content) content += delta.content
    for (const tc of delta.tool_calls ?? []) {
      const c = (calls[tc.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } })
      if (tc.id) c.id = tc.id
      if (tc.function?.name) c.function.name += tc.function.name
      if (tc.function?.arguments) c.function.arguments += tc.function.arguments
    }
  }
  return { content, calls }
}

const messages = [{ role: "user", content: prompt }]
for (let i = 0; i < 4; i++) {
  const { content, calls } = await turn(messages)
  if (calls.length === 0) {
    process.stdout.write(content + "\n")
    process.exit(0)
  }
  messages.push({ role: "assistant", content: content || null, tool_calls: calls })
  for (const call of calls) {
    const { cmd } = JSON.parse(call.function.arguments)
    process.stderr.write(`exec ${call.function.name} ${cmd}\n`)
    const output = execFileSync("/bin/sh", ["-c", cmd], { encoding: "utf8", timeout: 10_000 })
    messages.push({ role: "tool", tool_call_id: call.id, content: `Output:\n${output}` })
  }
}
process.stderr.write("no final answer after 4 turns\n")
process.exit(1)
