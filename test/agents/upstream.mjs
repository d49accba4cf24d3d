#!/usr/bin/env node
// A fake OpenAI-compatible Chat Completions upstream for the agents' end-to-end test (plain node:http, no
// dependencies): the edge's `openai` provider talks to it, the agents talk to the edge.
//
// Logs every request as one JSON line to UPSTREAM_LOG (method, path, headers with secrets redacted, the parsed body,
// and what it answered), and scripts the model per request, statelessly:
//   - the history holds a tool result (a `tool` message, or, in the edge's `tools: "text"` mode, a user message with
//     `<tool_response>…</tool_response>`): answer text quoting the command's output
//     (`AGENT-E2E-OK: the command printed "hi"`);
//   - else the request offers the tool UPSTREAM_TOOL (native `tools`, or described in a system message in text mode):
//     call it with UPSTREAM_ARGS (JSON), either natively (`tool_calls` deltas) or, with UPSTREAM_STYLE=markup, as
//     `<tool_call>{"name":…,"arguments":…}</tool_call>` in content, split across deltas mid-tag;
//   - else answer plain text.
// The edge always asks for a stream; `stream: false` gets a JSON completion anyway.
//
//   POST /v1/chat/completions   the scripted model
//   GET  /v1/models             one model
//   anything else               404 (logged)
//
// Env: UPSTREAM_PORT (default 8787), UPSTREAM_HOST (127.0.0.1), UPSTREAM_LOG (default ./upstream.jsonl),
// UPSTREAM_STYLE (native | markup, default native), UPSTREAM_TOOL (default exec_command), UPSTREAM_ARGS (default
// {"cmd":"echo hi"}), UPSTREAM_API_KEY (when set, requests without `Authorization: Bearer <it>` get 401).
import { createServer } from "node:http"
import { appendFileSync } from "node:fs"
import { randomBytes } from "node:crypto"

const HOST = process.env.UPSTREAM_HOST ?? "127.0.0.1"
const PORT = Number(process.env.UPSTREAM_PORT ?? 8787)
const LOG = process.env.UPSTREAM_LOG ?? "upstream.jsonl"
const STYLE = process.env.UPSTREAM_STYLE ?? "native"
const TOOL = process.env.UPSTREAM_TOOL ?? "exec_command"
const ARGS = JSON.parse(process.env.UPSTREAM_ARGS ?? '{"cmd":"echo hi"}')
const API_KEY = process.env.UPSTREAM_API_KEY ?? ""
if (STYLE !== "native" && STYLE !== "markup") throw new Error(`UPSTREAM_STYLE: native or markup, not ${STYLE}`)

const ANSWER_PREFIX = "AGENT-E2E-OK: the command printed"

let seq = 0
const t0 = Date.now()
const rid = (prefix) => `${prefix}${randomBytes(12).toString("hex")}`

const SECRET = /authorization|api-key|apikey|token|secret|cookie/i
const redact = (headers) =>
  Object.fromEntries(
    Object.entries(headers).map(([k, v]) => [k, SECRET.test(k) && typeof v === "string" ? `<redacted ${v.length} chars>` : v])
  )

const textOf = (content) =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content.map((p) => (typeof p?.text === "string" ? p.text : "")).join("\n")
      : ""

/** The last tool result in the history, as text, and where it was found; undefined when there is none. */
function toolResult(messages) {
  if (!Array.isArray(messages)) return undefined
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (m?.role === "tool") return { text: textOf(m.content), via: "tool message", index: i }
    if (m?.role === "user") {
      const all = [...textOf(m.content).matchAll(/<tool_response>([\s\S]*?)<\/tool_response>/g)]
      if (all.length > 0) return { text: all[all.length - 1][1], via: "user <tool_response>", index: i }
    }
  }
  return undefined
}

/** How the request offers UPSTREAM_TOOL: as a native tool, in a system prompt (text mode), or not at all. */
function offered(body) {
  if (Array.isArray(body.tools) && body.tools.some((t) => t?.function?.name === TOOL)) return "native"
  const system = (body.messages ?? []).filter((m) => m?.role === "system").map((m) => textOf(m.content)).join("\n")
  if (system.includes("<tools>") && system.includes(`"name":"${TOOL}"`)) return "system prompt"
  return undefined
}

/** The command output in a tool result: Codex's exec_command wraps it (`…\nOutput:\nhi\n`), Claude's Bash does not. */
function commandOutput(text) {
  const m = /(?:^|\n)Output:\n([\s\S]*)$/.exec(text)
  return (m ? m[1] : text).trim()
}

function plan(body) {
  const result = toolResult(body.messages)
  if (result !== undefined) {
    const out = commandOutput(result.text)
    return { kind: "text", text: `${ANSWER_PREFIX} ${JSON.stringify(out.slice(0, 200))}`, toolResult: result }
  }
  const how = offered(body)
  if (how !== undefined) return { kind: STYLE === "markup" ? "markup" : "tool", offered: how }
  return { kind: "text", text: "Hello from the fake upstream." }
}

/** Pieces of `text` cut at awkward places (inside the tag, inside the JSON), as a model's tokens would be. */
function pieces(text) {
  const cuts = [3, 7, 11, 12, 20, 31, Math.floor(text.length / 2), text.length - 12, text.length - 3]
    .filter((c, i, all) => c > 0 && c < text.length && all.indexOf(c) === i)
    .sort((a, b) => a - b)
  const out = []
  let at = 0
  for (const c of cuts) {
    out.push(text.slice(at, c))
    at = c
  }
  out.push(text.slice(at))
  return out
}

function chunks(body, p) {
  const id = rid("chatcmpl-")
  const created = Math.floor(Date.now() / 1000)
  const model = body.model ?? "fake-coder"
  const chunk = (delta, finish_reason = null) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices: [{ index: 0, delta, finish_reason, logprobs: null }]
  })
  const usage = { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 }
  const out = [chunk({ role: "assistant", content: "" })]
  let message
  let finish
  if (p.kind === "tool") {
    const args = JSON.stringify(ARGS)
    const callId = rid("call_")
    const half = Math.ceil(args.length / 2)
    out.push(chunk({ tool_calls: [{ index: 0, id: callId, type: "function", function: { name: TOOL, arguments: "" } }] }))
    out.push(chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(0, half) } }] }))
    out.push(chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(half) } }] }))
    message = { role: "assistant", content: null, tool_calls: [{ id: callId, type: "function", function: { name: TOOL, arguments: args } }] }
    finish = "tool_calls"
  } else {
    const text = p.kind === "markup" ? `<tool_call>${JSON.stringify({ name: TOOL, arguments: ARGS })}</tool_call>` : p.text
    for (const piece of pieces(text)) out.push(chunk({ content: piece }))
    message = { role: "assistant", content: text }
    finish = "stop"
  }
  out.push(chunk({}, finish))
  out.push({ id, object: "chat.completion.chunk", created, model, choices: [], usage })
  const final = { id, object: "chat.completion", created, model, choices: [{ index: 0, message, finish_reason: finish }], usage }
  return { out, final }
}

function json(res, status, obj) {
  const s = JSON.stringify(obj)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(s) })
  res.end(s)
}

const log = (rec) => appendFileSync(LOG, JSON.stringify(rec) + "\n")

const server = createServer((req, res) => {
  const parts = []
  req.on("data", (c) => parts.push(c))
  req.on("end", () => {
    const url = new URL(req.url ?? "/", "http://upstream")
    const raw = Buffer.concat(parts).toString("utf8")
    let body
    try {
      body = raw ? JSON.parse(raw) : undefined
    } catch {}
    const rec = {
      seq: ++seq,
      t_ms: Date.now() - t0,
      method: req.method,
      path: url.pathname,
      headers: redact(req.headers),
      body_bytes: Buffer.byteLength(raw),
      ...(body !== undefined ? { body } : { body_text: raw.slice(0, 2000) })
    }
    try {
      if (API_KEY && req.headers.authorization !== `Bearer ${API_KEY}`) {
        rec.response = { status: 401 }
        log(rec)
        return json(res, 401, { error: { message: "fake upstream: bad key", type: "invalid_request_error", code: "invalid_api_key" } })
      }
      if (req.method === "GET" && url.pathname === "/v1/models") {
        rec.response = { status: 200, kind: "models" }
        log(rec)
        return json(res, 200, { object: "list", data: [{ id: "fake-coder", object: "model", created: 0, owned_by: "fake" }] })
      }
      if (req.method === "POST" && url.pathname === "/v1/chat/completions" && body !== undefined) {
        const p = plan(body)
        const { out, final } = chunks(body, p)
        rec.response = { status: 200, plan: p.kind, offered: p.offered, tool_result: p.toolResult, stream: body.stream !== false }
        if (body.stream === false) {
          log(rec)
          return json(res, 200, final)
        }
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
        for (const c of out) {
          if (c.usage !== undefined && body.stream_options?.include_usage !== true) continue
          res.write(`data: ${JSON.stringify(c)}\n\n`)
        }
        res.end("data: [DONE]\n\n")
        rec.response.chunks = out.length
        return log(rec)
      }
      rec.response = { status: 404 }
      log(rec)
      return json(res, 404, { error: { message: `fake upstream: no route for ${req.method} ${url.pathname}`, type: "not_found" } })
    } catch (e) {
      rec.response = { status: 500, error: String(e?.stack ?? e) }
      log(rec)
      if (!res.headersSent) json(res, 500, { error: { message: String(e) } })
      else res.end()
    }
  })
})

server.listen(PORT, HOST, () => process.stderr.write(`fake upstream on http://${HOST}:${PORT} style=${STYLE} tool=${TOOL}\n`))
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0))
