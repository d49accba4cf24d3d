import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * A fake OpenAI-compatible upstream on 127.0.0.1 (ephemeral port) for tests
 * and e2e runs. Each `POST /v1/chat/completions` gets the script the handler
 * returns; `GET /v1/models` lists `models`. It records every request and every
 * connection the client closed before the response ended (`aborted`).
 */

/** A script for one request. A string event is written as it is (raw SSE text); an object as `data: <json>\n\n`. */
export type Script =
  | {
    readonly kind: "sse"
    readonly events: ReadonlyArray<string | object>
    /** Pause before each event. */
    readonly delayMs?: number
    /** Send `data: [DONE]` at the end (default true). */
    readonly done?: boolean
  }
  /** A whole answer (or an error body); `delayMs`: nothing at all is sent before it (a whole answer computing). */
  | { readonly kind: "json"; readonly status: number; readonly body: unknown; readonly delayMs?: number }
  /** Send the events, then nothing, keeping the connection open. */
  | { readonly kind: "stall"; readonly before?: ReadonlyArray<string | object> }
  /** Send the events, then reset the connection. */
  | { readonly kind: "reset"; readonly before?: ReadonlyArray<string | object> }

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly body: unknown
  readonly headers: Record<string, string | string[] | undefined>
}

export interface FakeUpstream {
  /** Base URL ending in `/v1`. */
  readonly url: string
  readonly requests: Array<RecordedRequest>
  /** Every other request (`GET /props`, `/version`, `/api/version`, `/v1/models`, …), in order. */
  readonly others: Array<RecordedRequest>
  /** `Date.now()` when the client closed a connection before its response ended. */
  readonly aborted: Array<{ readonly at: number }>
  /** `Date.now()` when the fake had written a response to its end (the client may not have read it yet). */
  readonly finished: Array<{ readonly at: number }>
  /** TCP connections accepted so far (a client that reuses its keep-alive connections opens one). */
  readonly connections: () => number
  readonly close: () => Promise<void>
}

export type Handler = (request: RecordedRequest, index: number) => Script | Promise<Script>

/**
 * How a `GET` route answers: a JSON body (status 200 unless given), a bare status, `hang` (never: the connection
 * stays open), or `reset` (the connection is destroyed before any answer).
 */
export type RouteAnswer = { readonly status?: number; readonly body?: unknown } | "hang" | "reset"

export interface FakeUpstreamOptions {
  readonly models?: ReadonlyArray<string>
  /** Served as llama.cpp does, `GET /props` → `{ chat_template }` (no such route without it). */
  readonly chatTemplate?: string
  /** More `GET` routes by path (`/props`, `/version`, `/api/version`); a function answers its n-th call (0-based). */
  readonly routes?: Readonly<Record<string, RouteAnswer | ((index: number) => RouteAnswer)>>
  /** A `Server` header on every answer (llama-server sends `llama.cpp`). */
  readonly server?: string
}

export const FAKE_MODEL = "fake-model"

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** The SSE text of one event. */
export const frame = (event: string | object): string =>
  typeof event === "string" ? event : `data: ${JSON.stringify(event)}\n\n`

/** The SSE text of a whole script of events. */
export const sseText = (events: ReadonlyArray<string | object>, done = true): string =>
  events.map(frame).join("") + (done ? "data: [DONE]\n\n" : "")

const readBody = (req: http.IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const parts: Array<Buffer> = []
    req.on("data", (part: Buffer) => parts.push(part))
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")))
    req.on("error", reject)
  })

const parseBody = (text: string): unknown => {
  if (text === "") return undefined
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * Writes a script's answer to one request. `onSelfClose` runs when the script itself is about to reset the
 * connection (so that close is not taken for the client's abort).
 */
export const playScript = async (
  req: http.IncomingMessage,
  res: http.ServerResponse,
  script: Script,
  onSelfClose: () => void = () => {}
): Promise<void> => {
  if (script.kind === "json") {
    if ((script.delayMs ?? 0) > 0) await sleep(script.delayMs ?? 0)
    if (res.destroyed) return
    res.writeHead(script.status, { "content-type": "application/json" }).end(JSON.stringify(script.body))
    return
  }
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
  res.flushHeaders()
  const events = script.kind === "sse" ? script.events : script.before ?? []
  const delayMs = script.kind === "sse" ? script.delayMs ?? 0 : 0
  for (const event of events) {
    if (delayMs > 0) await sleep(delayMs)
    if (res.destroyed) return
    res.write(frame(event))
  }
  switch (script.kind) {
    case "sse":
      res.end(script.done === false ? undefined : "data: [DONE]\n\n")
      return
    case "stall":
      return
    case "reset":
      onSelfClose()
      // Give the written events a moment to leave, then RST the connection.
      await sleep(20)
      if (res.destroyed) return
      req.socket.resetAndDestroy()
      return
  }
}

export const startFakeUpstream = async (
  handler: Handler | Script,
  options: FakeUpstreamOptions = {}
): Promise<FakeUpstream> => {
  const requests: Array<RecordedRequest> = []
  const others: Array<RecordedRequest> = []
  const routeCalls = new Map<string, number>()
  const aborted: Array<{ at: number }> = []
  const finished: Array<{ at: number }> = []
  const decide: Handler = typeof handler === "function" ? handler : () => handler

  const serve = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const path = (req.url ?? "/").split("?")[0] ?? "/"
    const recorded: RecordedRequest = {
      method: req.method ?? "GET",
      path,
      body: parseBody(await readBody(req)),
      headers: { ...req.headers }
    }
    if (options.server !== undefined) res.setHeader("server", options.server)
    if (req.method !== "POST" || path !== "/v1/chat/completions") others.push(recorded)
    const route = req.method === "GET" ? options.routes?.[path] : undefined
    if (route !== undefined) {
      const n = routeCalls.get(path) ?? 0
      routeCalls.set(path, n + 1)
      const answer = typeof route === "function" ? route(n) : route
      if (answer === "hang") return
      if (answer === "reset") return void req.socket.destroy()
      res.writeHead(answer.status ?? 200, { "content-type": "application/json" }).end(JSON.stringify(answer.body ?? {}))
      return
    }
    if (req.method === "GET" && path === "/v1/models") {
      const data = (options.models ?? [FAKE_MODEL]).map((id) => ({ id, object: "model", created: 0, owned_by: "fake" }))
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ object: "list", data }))
      return
    }
    if (req.method === "GET" && path === "/props" && options.chatTemplate !== undefined) {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ chat_template: options.chatTemplate }))
      return
    }
    if (req.method !== "POST" || path !== "/v1/chat/completions") {
      res.writeHead(404, { "content-type": "application/json" })
        .end(JSON.stringify({ error: { message: `no route ${req.method} ${path}`, type: "not_found" } }))
      return
    }
    requests.push(recorded)
    // Listen before the handler decides: a client may give up while it is still deciding.
    let selfClosed = false
    res.on("close", () => {
      if (!res.writableFinished && !selfClosed) aborted.push({ at: Date.now() })
    })
    const script = await decide(recorded, requests.length - 1)
    if (res.destroyed) return

    await playScript(req, res, script, () => {
      selfClosed = true
    })
    if (res.writableEnded) finished.push({ at: Date.now() })
  }

  const server = http.createServer((req, res) => {
    serve(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" })
      res.end(String(error))
    })
  })
  let connections = 0
  server.on("connection", () => connections++)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    others,
    aborted,
    finished,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
  }
}

// ---------------------------------------------------------------------------
// chunk builders

export interface UsageFields {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens?: number
  readonly prompt_tokens_details?: { readonly cached_tokens?: number }
  readonly completion_tokens_details?: { readonly reasoning_tokens?: number }
}

/** A usage object; `total_tokens` is filled in. */
export const completionTokens = (
  prompt: number,
  completion: number,
  details: { readonly cached?: number; readonly reasoning?: number } = {}
): UsageFields => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
  ...(details.cached !== undefined ? { prompt_tokens_details: { cached_tokens: details.cached } } : {}),
  ...(details.reasoning !== undefined ? { completion_tokens_details: { reasoning_tokens: details.reasoning } } : {})
})

export interface ToolCallDeltaFields {
  readonly index: number
  readonly id?: string
  readonly type?: "function"
  readonly function?: { readonly name?: string; readonly arguments?: string }
}

export interface ChunkFields {
  readonly role?: "assistant"
  readonly content?: string | null
  readonly reasoning_content?: string
  readonly reasoning?: string
  readonly tool_calls?: ReadonlyArray<ToolCallDeltaFields>
  readonly finish_reason?: string | null
  readonly usage?: UsageFields
  readonly model?: string
  /** The choice's `logprobs` (`{content: [...], refusal}`), beside its delta. */
  readonly logprobs?: object | null
}

/** One `chat.completion.chunk` with a single choice (index 0). */
export const chunk = (fields: ChunkFields = {}): object => {
  const { finish_reason, logprobs, model, usage, ...delta } = fields
  return {
    id: "chatcmpl-fake",
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model: model ?? FAKE_MODEL,
    choices: [{ index: 0, delta, ...(logprobs !== undefined ? { logprobs } : {}), finish_reason: finish_reason ?? null }],
    ...(usage !== undefined ? { usage } : {})
  }
}

/** The last chunk of a stream with `include_usage`: no choices, only usage. */
export const usageChunk = (usage: UsageFields, model: string = FAKE_MODEL): object => ({
  id: "chatcmpl-fake",
  object: "chat.completion.chunk",
  created: 1_700_000_000,
  model,
  choices: [],
  usage
})

/** A mid-stream error event as llama.cpp, vLLM and OpenAI send it. */
export const errorEvent = (message: string, type = "server_error"): object => ({ error: { message, type } })

export interface TextStreamOptions {
  readonly reasoning?: ReadonlyArray<string>
  readonly finish_reason?: string
  readonly usage?: UsageFields
  readonly model?: string
}

/** A whole streamed answer: role chunk, reasoning, tokens, finish chunk, and a usage chunk when given. */
export const textStream = (tokens: ReadonlyArray<string>, opts: TextStreamOptions = {}): Array<object> => {
  const model = opts.model !== undefined ? { model: opts.model } : {}
  return [
    chunk({ role: "assistant", content: "", ...model }),
    ...(opts.reasoning ?? []).map((text) => chunk({ reasoning_content: text, ...model })),
    ...tokens.map((content) => chunk({ content, ...model })),
    chunk({ finish_reason: opts.finish_reason ?? "stop", ...model }),
    ...(opts.usage !== undefined ? [usageChunk(opts.usage, opts.model)] : [])
  ]
}
