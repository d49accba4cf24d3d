import { Agent, request } from "undici"

/**
 * One HTTP exchange with the edge (undici) and the contract's
 * checks of its response: the SSE framing and "exactly one terminal outcome",
 * the chat.completion JSON, and the OpenAI error envelope. Checks return
 * violations (strings) instead of throwing, so that the same code serves the
 * vitest files and the soak.
 */

export interface Exchange {
  /** HTTP status, or 0 when no response came (connection error, timeout, client abort). */
  readonly status: number
  readonly contentType: string
  readonly body: string
  /** The network error, when no complete response came. */
  readonly error: string | undefined
  /** True when the client aborted on purpose (`abortAfterMs`). */
  readonly clientAborted: boolean
  /** `Date.now()` when the client aborted. */
  readonly abortedAt: number | undefined
  /** `Date.now()` when the request was sent and when its response ended (or failed). */
  readonly startedAt: number
  readonly endedAt: number
  readonly ms: number
}

export interface SendOptions {
  readonly headers?: Record<string, string>
  /** Abort the request (and its body) this many ms after it was sent. */
  readonly abortAfterMs?: number
  /** Give up after this long (a violation for the caller: the edge did not answer). */
  readonly timeoutMs?: number
  /** Do not add `content-type: application/json`. */
  readonly omitContentType?: boolean
}

export const chatUrl = (baseURL: string) => `${baseURL}/chat/completions`

/**
 * The client's connection pool. An idle keep-alive connection is reused for
 * at most 1 s (the edge closes idle ones after 5 s): a client process as
 * starved of CPU as the edge must not send a request onto a connection the
 * edge already closed and blame the edge for the reset. (undici is the
 * client of Node's fetch and of @effect/platform-node.)
 */
export const dispatcher = new Agent({ keepAliveTimeout: 1_000, keepAliveMaxTimeout: 1_000, connections: null })

const header = (value: string | Array<string> | undefined): string => (Array.isArray(value) ? value.join(", ") : value ?? "")

/** GET `url` (health, metrics): status and body text. */
export const get = async (url: string, timeoutMs = 10_000): Promise<{ readonly status: number; readonly body: string }> => {
  const response = await request(url, { method: "GET", dispatcher, signal: AbortSignal.timeout(timeoutMs) })
  return { status: response.statusCode, body: await response.body.text() }
}

/**
 * POSTs `body` and reads the response incrementally: `onText` sees the text
 * received so far after every read. Resolves with the whole exchange.
 */
export const post = async (
  url: string,
  payload: string | Uint8Array,
  headers: Record<string, string>,
  signal: AbortSignal,
  onText?: (textSoFar: string) => void
): Promise<{ readonly status: number; readonly contentType: string; readonly body: string }> => {
  const response = await request(url, { method: "POST", headers, body: payload, signal, dispatcher })
  const decoder = new TextDecoder()
  let text = ""
  for await (const part of response.body) {
    text += decoder.decode(part as Uint8Array, { stream: true })
    onText?.(text)
  }
  text += decoder.decode()
  return { status: response.statusCode, contentType: header(response.headers["content-type"]), body: text }
}

/** POSTs `body` (an object is JSON-encoded; a string or bytes are sent as they are). */
export const send = async (url: string, body: unknown, options: SendOptions = {}): Promise<Exchange> => {
  const started = Date.now()
  const controller = new AbortController()
  let clientAborted = false
  let abortedAt: number | undefined
  let timedOut = false
  const abortTimer =
    options.abortAfterMs !== undefined
      ? setTimeout(() => {
        clientAborted = true
        abortedAt = Date.now()
        controller.abort()
      }, options.abortAfterMs)
      : undefined
  const timeoutTimer = setTimeout(() => {
    timedOut = true
    controller.abort()
  }, options.timeoutMs ?? 60_000)
  const payload: string | Uint8Array = typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body)
  try {
    const headers = { ...(options.omitContentType === true ? {} : { "content-type": "application/json" }), ...options.headers }
    const response = await post(url, payload, headers, controller.signal)
    return {
      status: response.status,
      contentType: response.contentType,
      body: response.body,
      error: undefined,
      clientAborted: false,
      abortedAt,
      startedAt: started,
      endedAt: Date.now(),
      ms: Date.now() - started
    }
  } catch (e) {
    const code = typeof (e as { code?: unknown })?.code === "string" ? ` (${(e as { code: string }).code})` : ""
    const message = timedOut ? `no complete response within ${options.timeoutMs ?? 60_000} ms` : `${String(e)}${code}`
    return {
      status: 0,
      contentType: "",
      body: "",
      error: message,
      clientAborted,
      abortedAt,
      startedAt: started,
      endedAt: Date.now(),
      ms: Date.now() - started
    }
  } finally {
    if (abortTimer !== undefined) clearTimeout(abortTimer)
    clearTimeout(timeoutTimer)
  }
}

// ---------------------------------------------------------------------------
// checks

export interface Verdict {
  /**
   * `sse:finish:<reason>` / `sse:error:<type>`, `json:finish:<reason>`,
   * `http:<status>:<error type>`, `net:<error>`.
   */
  readonly outcome: string
  readonly violations: ReadonlyArray<string>
  /** The message of the error (SSE error event or HTTP error body), if any. */
  readonly errorMessage: string | undefined
  /** Content received (SSE or JSON). */
  readonly content: string
  /** The parsed JSON body of a non-SSE response (undefined when not JSON). */
  readonly json: any
}

const short = (s: string, n = 300) => (s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : s)

/** The OpenAI error envelope: exactly `{"error": {message, type, param, code}}`. */
export const errorShapeViolations = (body: any): Array<string> => {
  const v: Array<string> = []
  if (typeof body !== "object" || body === null || Array.isArray(body)) return [`error body is not an object: ${short(JSON.stringify(body) ?? "")}`]
  if (JSON.stringify(Object.keys(body)) !== "[\"error\"]") v.push(`error body keys are ${JSON.stringify(Object.keys(body))}, expected ["error"]`)
  const e = body.error
  if (typeof e !== "object" || e === null) return [...v, "error is not an object"]
  if (typeof e.message !== "string" || e.message.length === 0) v.push("error.message is not a non-empty string")
  if (typeof e.type !== "string" || e.type.length === 0) v.push("error.type is not a non-empty string")
  if (!("param" in e) || (e.param !== null && typeof e.param !== "string")) v.push("error.param is missing or not string|null")
  if (!("code" in e) || (e.code !== null && typeof e.code !== "string")) v.push("error.code is missing or not string|null")
  return v
}

const finishOf = (event: any): string | undefined => {
  const choices = event?.choices
  if (!Array.isArray(choices)) return undefined
  for (const c of choices) if (c?.finish_reason != null) return String(c.finish_reason)
  return undefined
}

/**
 * The SSE body: every event exactly `data: <payload>\n\n`, `[DONE]` once and
 * last, the first chunk `delta.role: "assistant"`, exactly one terminal
 * outcome (a finish chunk, then at most usage chunks; or one error event, last).
 */
export const inspectSse = (raw: string): { outcome: string; violations: Array<string>; errorMessage: string | undefined; content: string } => {
  const v: Array<string> = []
  let content = ""
  if (!raw.endsWith("data: [DONE]\n\n")) v.push(`SSE body does not end with "data: [DONE]\\n\\n": …${JSON.stringify(raw.slice(-120))}`)
  const trimmed = raw.endsWith("\n\n") ? raw.slice(0, -2) : raw
  const blocks = trimmed === "" ? [] : trimmed.split("\n\n")
  const data: Array<string> = []
  for (const block of blocks) {
    if (!/^data: [^\n]*$/.test(block)) v.push(`not a single "data: " line: ${short(JSON.stringify(block), 200)}`)
    else data.push(block.slice(6))
  }
  const dones = data.filter((d) => d === "[DONE]").length
  if (dones !== 1) v.push(`[DONE] ${dones} times`)
  else if (data[data.length - 1] !== "[DONE]") v.push("[DONE] is not the last event")
  const events: Array<any> = []
  for (const d of data) {
    if (d === "[DONE]") continue
    try {
      events.push(JSON.parse(d))
    } catch {
      v.push(`event is not JSON: ${short(d, 200)}`)
    }
  }
  const terminals: Array<{ index: number; kind: "finish" | "error"; detail: string; message?: string }> = []
  events.forEach((e, index) => {
    if (typeof e === "object" && e !== null && "error" in e) {
      const type = typeof e.error?.type === "string" ? e.error.type : "?"
      if (typeof e.error?.type !== "string" || typeof e.error?.message !== "string") v.push(`malformed error event: ${short(JSON.stringify(e), 200)}`)
      terminals.push({ index, kind: "error", detail: type, message: String(e.error?.message) })
      return
    }
    if (e?.object !== "chat.completion.chunk") v.push(`event is not a chat.completion.chunk: ${short(JSON.stringify(e), 200)}`)
    const c = e?.choices?.[0]?.delta?.content
    if (typeof c === "string") content += c
    const finish = finishOf(e)
    if (finish !== undefined) terminals.push({ index, kind: "finish", detail: finish })
  })
  const first = events[0]
  if (first !== undefined && !("error" in first) && first?.choices?.[0]?.delta?.role !== "assistant") {
    v.push(`first chunk has no delta.role "assistant": ${short(JSON.stringify(first), 200)}`)
  }
  if (terminals.length !== 1) {
    v.push(`${terminals.length} terminal outcomes (${terminals.map((t) => `${t.kind}:${t.detail}`).join(", ")}), expected exactly 1`)
  }
  const terminal = terminals[0]
  if (terminal?.kind === "error" && terminal.index !== events.length - 1) v.push("the error event is not the last event before [DONE]")
  if (terminal?.kind === "finish") {
    for (const e of events.slice(terminal.index + 1)) {
      if (!(Array.isArray(e?.choices) && e.choices.length === 0 && e.usage !== undefined)) {
        v.push(`after the finish chunk comes something other than a usage chunk: ${short(JSON.stringify(e), 200)}`)
      }
    }
  }
  const outcome = terminal === undefined ? "sse:none" : `sse:${terminal.kind}:${terminal.detail}`
  return { outcome, violations: v, errorMessage: terminal?.message, content }
}

/** Classifies an exchange and checks its response against the contract. */
export const verdict = (ex: Exchange): Verdict => {
  if (ex.status === 0) {
    return {
      outcome: ex.clientAborted ? "client-aborted" : `net:${ex.error ?? "?"}`,
      violations: ex.clientAborted ? [] : [`no response: ${ex.error ?? "?"}`],
      errorMessage: undefined,
      content: "",
      json: undefined
    }
  }
  if (ex.status === 200 && ex.contentType.startsWith("text/event-stream")) {
    const sse = inspectSse(ex.body)
    return { ...sse, json: undefined }
  }
  let json: any
  try {
    json = JSON.parse(ex.body)
  } catch {
    return {
      outcome: `http:${ex.status}:not-json`,
      violations: [`HTTP ${ex.status} with a body that is not JSON (${ex.contentType}): ${short(ex.body, 200)}`],
      errorMessage: undefined,
      content: "",
      json: undefined
    }
  }
  const v: Array<string> = []
  if (!ex.contentType.startsWith("application/json")) v.push(`HTTP ${ex.status} JSON body with content-type ${JSON.stringify(ex.contentType)}`)
  if (ex.status === 200) {
    const choice = json?.choices?.[0]
    if (json?.object !== "chat.completion") v.push(`200 JSON is not a chat.completion: ${short(ex.body, 200)}`)
    if (typeof choice?.finish_reason !== "string") v.push(`200 JSON without a finish_reason: ${short(ex.body, 200)}`)
    if (choice?.message?.role !== "assistant") v.push(`200 JSON message role is not assistant: ${short(ex.body, 200)}`)
    const content = typeof choice?.message?.content === "string" ? choice.message.content : ""
    return { outcome: `json:finish:${String(choice?.finish_reason)}`, violations: v, errorMessage: undefined, content, json }
  }
  v.push(...errorShapeViolations(json).map((s) => `HTTP ${ex.status}: ${s}`))
  const type = typeof json?.error?.type === "string" ? json.error.type : "?"
  return {
    outcome: `http:${ex.status}:${type}`,
    violations: v,
    errorMessage: typeof json?.error?.message === "string" ? json.error.message : undefined,
    content: "",
    json
  }
}

/** Runs `task(i)` for i in [0, count) with at most `concurrency` at once. */
export const pool = async <A>(count: number, concurrency: number, task: (i: number) => Promise<A>): Promise<Array<A>> => {
  const results: Array<A> = new Array(count)
  let next = 0
  const worker = async () => {
    for (;;) {
      const i = next++
      if (i >= count) return
      results[i] = await task(i)
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker))
  return results
}

/** Counts of each value. */
export const tally = (values: Iterable<string>): Record<string, number> => {
  const out: Record<string, number> = {}
  for (const v of values) out[v] = (out[v] ?? 0) + 1
  return out
}

export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}
