#!/usr/bin/env node
// Recording fake upstream for coding agents (Codex CLI, Claude Code): plain node:http, no dependencies.
//
// Logs every request (method, path, query, headers with secrets redacted, body parsed as JSON when it is) as one
// JSON line per request to RECORDER_LOG (default ./recorder.jsonl), and answers:
//   POST /v1/responses            OpenAI Responses streaming (SSE `event:` + `data:`), or JSON when stream is false
//   POST /v1/messages[?beta=true] Anthropic Messages streaming, or JSON when stream is false
//   POST /v1/messages/count_tokens  {input_tokens}
//   GET  /v1/models[...]          a one-model list (both OpenAI and Anthropic shapes in one object)
//   HEAD|GET /                    200
//   anything else                 404 JSON error (still logged)
//
// Scripted model, per request, stateless (decided from the request alone):
//   - the history holds a tool result (function_call_output / tool_result): answer text quoting that output;
//   - else the request offers a shell tool (Codex: shell / shell_command / exec_command / local_shell; Claude: Bash):
//     call it with RECORDER_COMMAND (default `echo hi`);
//   - else answer plain text.
//
// Env: RECORDER_PORT (default 0 = any), RECORDER_HOST (127.0.0.1), RECORDER_LOG, RECORDER_PORT_FILE (written once
// listening), RECORDER_COMMAND, RECORDER_DROP (comma-separated event types to leave out of every stream, to find
// which ones an agent needs), RECORDER_NO_TOOL=1 (never call a tool), RECORDER_DELAY_MS (between events, default 0),
// RECORDER_BARE=1 (SSE without `event:` lines, data only), RECORDER_NO_USAGE=1 (no usage anywhere),
// RECORDER_NO_SEQ=1 (Responses events without sequence_number),
// RECORDER_FAIL_STATUS=429|500|... with RECORDER_FAIL_COUNT=n (default 1): the first n model requests get that HTTP
// error (with retry-after: 0) instead of an answer, to see the agent's retries.
// RECORDER_STREAM_FAIL=<error type or code> (e.g. overloaded_error, server_error, rate_limit_exceeded): the first model
// stream sends its created/start events, then ends in `response.failed` (Responses) or an `error` event (Anthropic).
// RECORDER_TOOL_INPUT_IN_START=1: Anthropic tool_use input whole in content_block_start, no input_json_delta.
// RECORDER_ROOT_STATUS=404|...: the status for HEAD|GET / (default 200).
// A request whose Anthropic output_config.format / Responses text.format is a json_schema gets a JSON text answer.
import { createServer } from "node:http"
import { appendFileSync, writeFileSync } from "node:fs"
import { gunzipSync, inflateSync, brotliDecompressSync } from "node:zlib"
import { randomBytes } from "node:crypto"

const HOST = process.env.RECORDER_HOST ?? "127.0.0.1"
const PORT = Number(process.env.RECORDER_PORT ?? 0)
const LOG = process.env.RECORDER_LOG ?? "recorder.jsonl"
const COMMAND = process.env.RECORDER_COMMAND ?? "echo hi"
const DROP = new Set((process.env.RECORDER_DROP ?? "").split(",").map((s) => s.trim()).filter(Boolean))
const NO_TOOL = process.env.RECORDER_NO_TOOL === "1"
const DELAY_MS = Number(process.env.RECORDER_DELAY_MS ?? 0)
const BARE = process.env.RECORDER_BARE === "1"
const NO_SEQ = process.env.RECORDER_NO_SEQ === "1"
const STREAM_FAIL = process.env.RECORDER_STREAM_FAIL ?? "" // an error type: the first model stream ends in an error event
let streamFailLeft = STREAM_FAIL ? 1 : 0
const NO_USAGE = process.env.RECORDER_NO_USAGE === "1"
const FAIL_STATUS = Number(process.env.RECORDER_FAIL_STATUS ?? 0)
let failLeft = FAIL_STATUS ? Number(process.env.RECORDER_FAIL_COUNT ?? 1) : 0

let seq = 0
const t0 = Date.now()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const rid = (prefix) => `${prefix}${randomBytes(12).toString("hex")}`

const SECRET = /authorization|api-key|apikey|token|secret|cookie/i
function redact(headers) {
  const out = {}
  for (const [k, v] of Object.entries(headers)) {
    if (SECRET.test(k) && typeof v === "string") {
      const scheme = /^(Bearer|Basic)\s+/i.exec(v)?.[0] ?? ""
      out[k] = `${scheme}<redacted ${v.length - scheme.length} chars>`
    } else out[k] = v
  }
  return out
}

function decodeBody(raw, encoding) {
  const enc = (encoding ?? "").toLowerCase()
  try {
    if (enc === "gzip") return { buf: gunzipSync(raw), note: "gzip" }
    if (enc === "deflate") return { buf: inflateSync(raw), note: "deflate" }
    if (enc === "br") return { buf: brotliDecompressSync(raw), note: "br" }
  } catch (e) {
    return { buf: raw, note: `${enc} (decode failed: ${e.message})` }
  }
  if (enc && enc !== "identity") return { buf: raw, note: `${enc} (not decoded)` }
  return { buf: raw, note: undefined }
}

function log(rec) {
  appendFileSync(LOG, JSON.stringify(rec) + "\n")
}

// ---------- OpenAI Responses ----------

const SHELL_NAMES = ["shell", "shell_command", "exec_command", "container.exec", "bash"]

function findCodexShell(tools) {
  if (!Array.isArray(tools)) return undefined
  for (const name of SHELL_NAMES) {
    const t = tools.find((t) => t?.type === "function" && t.name === name)
    if (t) return t
  }
  return tools.find((t) => t?.type === "local_shell")
}

function codexArgs(tool) {
  const props = tool.parameters?.properties ?? {}
  if (props.cmd) return { cmd: COMMAND } // exec_command (unified exec)
  if (props.command?.type === "array") return { command: ["bash", "-lc", COMMAND] } // legacy shell
  return { command: COMMAND } // shell_command
}

function responsesToolOutput(input) {
  if (!Array.isArray(input)) return undefined
  const outs = input.filter((i) => i?.type === "function_call_output" || i?.type === "local_shell_call_output" || i?.type === "custom_tool_call_output")
  if (outs.length === 0) return undefined
  const o = outs[outs.length - 1].output
  return typeof o === "string" ? o : JSON.stringify(o)
}

function baseResponse(body, id, status, output, usage) {
  return {
    id,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model: body.model ?? "recorder-model",
    output,
    parallel_tool_calls: body.parallel_tool_calls ?? false,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: body.store ?? false,
    temperature: 1,
    text: { format: { type: "text" }, verbosity: "medium" },
    tool_choice: body.tool_choice ?? "auto",
    tools: [],
    top_p: 1,
    truncation: "disabled",
    usage: usage ?? null,
    user: null,
    metadata: {}
  }
}

function responsesPlan(body) {
  const toolOut = responsesToolOutput(body.input)
  const shell = NO_TOOL ? undefined : findCodexShell(body.tools)
  if (toolOut !== undefined) return { kind: "text", text: `The command printed: ${toolOut.trim().slice(0, 200)}` }
  if (shell) return { kind: "tool", tool: shell }
  if (body.text?.format?.type === "json_schema") return { kind: "text", text: JSON.stringify({ title: "Recorder session" }) }
  return { kind: "text", text: "Hello from the recorder." }
}

function responsesEvents(body) {
  const plan = responsesPlan(body)
  const respId = rid("resp_")
  const events = []
  const usage = {
    input_tokens: 100,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: 10,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 110
  }
  let item
  events.push(["response.created", { response: baseResponse(body, respId, "in_progress", []) }])
  events.push(["response.in_progress", { response: baseResponse(body, respId, "in_progress", []) }])
  if (plan.kind === "text") {
    const itemId = rid("msg_")
    const added = { id: itemId, type: "message", status: "in_progress", role: "assistant", content: [] }
    item = {
      id: itemId,
      type: "message",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", annotations: [], logprobs: [], text: plan.text }]
    }
    const part0 = { type: "output_text", annotations: [], logprobs: [], text: "" }
    const half = Math.ceil(plan.text.length / 2)
    events.push(["response.output_item.added", { output_index: 0, item: added }])
    events.push(["response.content_part.added", { item_id: itemId, output_index: 0, content_index: 0, part: part0 }])
    for (const delta of [plan.text.slice(0, half), plan.text.slice(half)])
      events.push(["response.output_text.delta", { item_id: itemId, output_index: 0, content_index: 0, delta, logprobs: [] }])
    events.push(["response.output_text.done", { item_id: itemId, output_index: 0, content_index: 0, text: plan.text, logprobs: [] }])
    events.push(["response.content_part.done", { item_id: itemId, output_index: 0, content_index: 0, part: item.content[0] }])
    events.push(["response.output_item.done", { output_index: 0, item }])
  } else if (plan.tool.type === "local_shell") {
    const itemId = rid("lsh_")
    const callId = rid("call_")
    item = {
      id: itemId,
      type: "local_shell_call",
      call_id: callId,
      status: "completed",
      action: { type: "exec", command: ["bash", "-lc", COMMAND], env: {} }
    }
    events.push(["response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress" } }])
    events.push(["response.output_item.done", { output_index: 0, item }])
  } else {
    const itemId = rid("fc_")
    const callId = rid("call_")
    const args = JSON.stringify(codexArgs(plan.tool))
    item = { id: itemId, type: "function_call", status: "completed", call_id: callId, name: plan.tool.name, arguments: args }
    events.push(["response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress", arguments: "" } }])
    const half = Math.ceil(args.length / 2)
    for (const delta of [args.slice(0, half), args.slice(half)])
      events.push(["response.function_call_arguments.delta", { item_id: itemId, output_index: 0, delta }])
    events.push(["response.function_call_arguments.done", { item_id: itemId, output_index: 0, name: plan.tool.name, arguments: args }])
    events.push(["response.output_item.done", { output_index: 0, item }])
  }
  const u = NO_USAGE ? undefined : usage
  events.push(["response.completed", { response: baseResponse(body, respId, "completed", [item], u) }])
  return { plan, events, final: baseResponse(body, respId, "completed", [item], u) }
}

// ---------- Anthropic Messages ----------

function anthropicToolResult(messages) {
  if (!Array.isArray(messages)) return undefined
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (m?.role !== "user" || !Array.isArray(m.content)) continue
    const tr = m.content.filter((b) => b?.type === "tool_result")
    if (tr.length === 0) return undefined // the latest user turn has no tool result: a fresh prompt
    const c = tr[tr.length - 1].content
    return typeof c === "string" ? c : Array.isArray(c) ? c.map((b) => b?.text ?? "").join("") : JSON.stringify(c)
  }
  return undefined
}

function anthropicPlan(body) {
  const toolOut = anthropicToolResult(body.messages)
  const bash = NO_TOOL ? undefined : Array.isArray(body.tools) ? body.tools.find((t) => t?.name === "Bash") : undefined
  if (toolOut !== undefined) return { kind: "text", text: `The command printed: ${toolOut.trim().slice(0, 200)}` }
  if (bash) return { kind: "tool", tool: bash }
  if (body.output_config?.format?.type === "json_schema") return { kind: "text", text: JSON.stringify({ title: "Recorder session" }) }
  return { kind: "text", text: "Hello from the recorder." }
}

function anthropicEvents(body) {
  const plan = anthropicPlan(body)
  const msgId = rid("msg_")
  const model = body.model ?? "recorder-model"
  const startUsage = {
    input_tokens: 100,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
    output_tokens: 1,
    service_tier: "standard"
  }
  const events = []
  let block
  let stopReason
  events.push([
    "message_start",
    {
      type: "message_start",
      message: {
        id: msgId,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        ...(NO_USAGE ? {} : { usage: startUsage })
      }
    }
  ])
  if (plan.kind === "text") {
    stopReason = "end_turn"
    block = { type: "text", text: plan.text }
    events.push(["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }])
    events.push(["ping", { type: "ping" }])
    const half = Math.ceil(plan.text.length / 2)
    for (const text of [plan.text.slice(0, half), plan.text.slice(half)])
      events.push(["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text } }])
  } else {
    stopReason = "tool_use"
    const input = { command: COMMAND, description: "Print hi" }
    block = { type: "tool_use", id: rid("toolu_"), name: plan.tool.name, input }
    const json = JSON.stringify(input)
    const inStart = process.env.RECORDER_TOOL_INPUT_IN_START === "1"
    events.push(["content_block_start", { type: "content_block_start", index: 0, content_block: { ...block, input: inStart ? input : {} } }])
    events.push(["ping", { type: "ping" }])
    const half = Math.ceil(json.length / 2)
    if (!inStart)
      for (const partial_json of ["", json.slice(0, half), json.slice(half)])
        events.push(["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json } }])
  }
  events.push(["content_block_stop", { type: "content_block_stop", index: 0 }])
  events.push([
    "message_delta",
    {
      type: "message_delta",
      delta: { stop_reason: stopReason, stop_sequence: null },
      ...(NO_USAGE ? {} : { usage: { input_tokens: 100, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 10 } })
    }
  ])
  events.push(["message_stop", { type: "message_stop" }])
  const final = {
    id: msgId,
    type: "message",
    role: "assistant",
    model,
    content: [block],
    stop_reason: stopReason,
    stop_sequence: null,
    usage: { ...startUsage, output_tokens: 10 }
  }
  return { plan, events, final }
}

// ---------- HTTP ----------

function failStream(events, numbered) {
  if (streamFailLeft <= 0) return events
  streamFailLeft--
  const head = events.slice(0, numbered ? 2 : 1) // response.created + in_progress / message_start
  if (numbered) {
    const resp = { ...events[0][1].response, status: "failed", error: { code: STREAM_FAIL, message: `recorder: injected ${STREAM_FAIL}` } }
    return [...head, ["response.failed", { response: resp }]]
  }
  return [...head, ["error", { type: "error", error: { type: STREAM_FAIL, message: `recorder: injected ${STREAM_FAIL}` } }]]
}

async function streamSse(res, events0, numbered) {
  const events = failStream(events0, numbered)
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    connection: "keep-alive",
    "x-request-id": rid("req_")
  })
  let n = 0
  const sent = []
  for (const [type, data] of events) {
    if (DROP.has(type)) continue
    const payload = numbered ? (NO_SEQ ? { type, ...data } : { type, sequence_number: n++, ...data }) : data
    res.write(BARE ? `data: ${JSON.stringify(payload)}\n\n` : `event: ${type}\ndata: ${JSON.stringify(payload)}\n\n`)
    sent.push(type)
    if (DELAY_MS) await sleep(DELAY_MS)
  }
  res.end()
  return sent
}

function json(res, status, obj, extra = {}) {
  const s = JSON.stringify(obj)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(s), ...extra })
  res.end(s)
}

const server = createServer((req, res) => {
  const chunks = []
  req.on("data", (c) => chunks.push(c))
  req.on("end", async () => {
    const n = ++seq
    const url = new URL(req.url ?? "/", "http://recorder")
    const raw = Buffer.concat(chunks)
    const { buf, note } = decodeBody(raw, req.headers["content-encoding"])
    let body
    let bodyText
    if (buf.length > 0) {
      const text = buf.toString("utf8")
      try {
        body = JSON.parse(text)
      } catch {
        bodyText = text.length > 20000 ? text.slice(0, 20000) + `…[${text.length} chars]` : text
      }
    }
    const rec = {
      seq: n,
      t_ms: Date.now() - t0,
      at: new Date().toISOString(),
      method: req.method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: redact(req.headers),
      body_bytes: raw.length,
      ...(note ? { body_encoding: note } : {}),
      ...(body !== undefined ? { body } : {}),
      ...(bodyText !== undefined ? { body_text: bodyText } : {})
    }
    try {
      const p = url.pathname.replace(/\/+$/, "") || "/"
      if ((req.method === "HEAD" || req.method === "GET") && p === "/") {
        const status = Number(process.env.RECORDER_ROOT_STATUS ?? 200)
        rec.response = { status }
        log(rec)
        res.writeHead(status, { "content-type": "text/plain" })
        return res.end(req.method === "HEAD" ? undefined : "ok")
      }
      if (req.method === "GET" && /\/models$/.test(p)) {
        const model = process.env.RECORDER_MODEL ?? "recorder-model"
        rec.response = { status: 200, kind: "models" }
        log(rec)
        return json(res, 200, {
          object: "list",
          data: [{ id: model, object: "model", created: 0, owned_by: "recorder", type: "model", display_name: model, created_at: "2025-01-01T00:00:00Z" }],
          has_more: false,
          first_id: model,
          last_id: model,
          models: []
        })
      }
      if (req.method === "POST" && /\/v1\/(responses|messages)$/.test(p) && failLeft > 0) {
        failLeft--
        rec.response = { status: FAIL_STATUS, injected: true }
        log(rec)
        const anthropic = p.endsWith("/messages")
        const kind = FAIL_STATUS === 429 ? "rate_limit_error" : FAIL_STATUS === 529 ? "overloaded_error" : FAIL_STATUS >= 500 ? "api_error" : "invalid_request_error"
        return json(
          res,
          FAIL_STATUS,
          anthropic
            ? { type: "error", error: { type: kind, message: `recorder: injected ${FAIL_STATUS}` } }
            : { error: { type: kind, code: kind, message: `recorder: injected ${FAIL_STATUS}`, param: null } },
          { "retry-after": "0", "retry-after-ms": "0" }
        )
      }
      if (req.method === "POST" && /\/v1\/responses$/.test(p)) {
        const { plan, events, final } = responsesEvents(body ?? {})
        if (body?.stream === false) {
          rec.response = { status: 200, plan: plan.kind, json: true }
          log(rec)
          return json(res, 200, final)
        }
        const sent = await streamSse(res, events, true)
        rec.response = { status: 200, plan: plan.kind, tool: plan.tool?.name ?? plan.tool?.type, events: sent }
        return log(rec)
      }
      if (req.method === "POST" && /\/v1\/messages\/count_tokens$/.test(p)) {
        rec.response = { status: 200, kind: "count_tokens" }
        log(rec)
        return json(res, 200, { input_tokens: 100 })
      }
      if (req.method === "POST" && /\/v1\/messages$/.test(p)) {
        const { plan, events, final } = anthropicEvents(body ?? {})
        if (!body?.stream) {
          rec.response = { status: 200, plan: plan.kind, json: true }
          log(rec)
          return json(res, 200, final, { "request-id": rid("req_") })
        }
        const sent = await streamSse(res, events, false)
        rec.response = { status: 200, plan: plan.kind, tool: plan.tool?.name, events: sent }
        return log(rec)
      }
      rec.response = { status: 404 }
      log(rec)
      return json(res, 404, {
        type: "error",
        error: { type: "not_found_error", message: `recorder: no route for ${req.method} ${url.pathname}`, code: "not_found" }
      })
    } catch (e) {
      rec.response = { status: 500, error: String(e?.stack ?? e) }
      log(rec)
      if (!res.headersSent) json(res, 500, { error: { message: String(e) } })
      else res.end()
    }
  })
})

server.listen(PORT, HOST, () => {
  const { port } = server.address()
  if (process.env.RECORDER_PORT_FILE) writeFileSync(process.env.RECORDER_PORT_FILE, String(port))
  process.stderr.write(`recorder listening on http://${HOST}:${port} log=${LOG}\n`)
})
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => server.close(() => process.exit(0)))
