/**
 * The load generator, in the bench's main process: streaming chat
 * completions over node:http, each read to its end. It counts content tokens
 * without parsing JSON (a `"content":"` with a non-empty value), so that the
 * client spends as little of the two cores as it can. Non-stream requests
 * (`stream: false`) are read whole and checked: one `chat.completion` whose
 * content is the fake upstream's text. The other dialects (`DIALECTS`:
 * Responses, Anthropic Messages) stream through the same scanner with their
 * own "content of this frame" and "terminal frame" functions.
 */
import { Agent, type ClientRequest, request } from "node:http"
import type { Socket } from "node:net"
import { completionText } from "./fakeText.js"

export interface Outcome {
  /** HTTP 200, the dialect's terminal event (`[DONE]`, …) seen, and the stream ended. */
  readonly ok: boolean
  readonly tokens: number
  /** Request sent → first content token, in ms (NaN if none came); for a non-stream request, → the whole body. */
  readonly ttftMs: number
  /** Response body reads (`data` events) at the client: how finely the relay split its writes. */
  readonly reads: number
  /** What went wrong, when not ok. */
  readonly error: string | undefined
}

const CONTENT = "\"content\":\""
const QUOTE = 34

const PROMPT = "Tell me about the quick brown fox."
const MESSAGES = [{ role: "user", content: PROMPT }]

export const requestBody = (model: string, stream = true): string =>
  JSON.stringify(
    stream
      ? { model, stream: true, stream_options: { include_usage: true }, messages: MESSAGES }
      : { model, stream: false, messages: MESSAGES }
  )

/**
 * How one API's event stream is read. A frame is `text[start, end)`, one SSE event without its blank line;
 * `content` is tried first, `terminal` only on frames without content.
 */
export interface Framing {
  readonly path: string
  /** The streamed request's body for `model`. */
  readonly body: (model: string) => string
  /** The characters of text content this frame carries, or -1 when it carries none. */
  readonly content: (text: string, start: number, end: number) => number
  /** 1: the stream's good end; -1: an end that says it failed (the frame becomes the error); 0: neither. */
  readonly terminal: (text: string, start: number, end: number) => number
  /** The good end's name, for "stream ended without …". */
  readonly terminalName: string
}

/** Chat Completions, the bench's hot loop: a frame is parsed only when it has a non-empty `"content":"`. */
const chatContent = (text: string, start: number, end: number): number => {
  const at = text.indexOf(CONTENT, start)
  if (at < 0 || at >= end || text.charCodeAt(at + CONTENT.length) === QUOTE) return -1
  const frame = JSON.parse(text.slice(start + "data: ".length, end)) as {
    choices?: Array<{ delta?: { content?: unknown } }>
  }
  const content = frame.choices?.[0]?.delta?.content
  return typeof content === "string" ? content.length : -1
}

const chatTerminal = (text: string, start: number): number => (text.startsWith("data: [DONE]", start) ? 1 : 0)

const chatCompletions: Framing = {
  path: "/v1/chat/completions",
  body: (model) => requestBody(model),
  content: chatContent,
  terminal: chatTerminal,
  terminalName: "[DONE]"
}

/** The JSON of a frame `event: <type>\ndata: <json>` (its first line is the event line). */
const eventData = (text: string, start: number, end: number): unknown =>
  JSON.parse(text.slice(text.indexOf("\n", start) + 1 + "data: ".length, end))

const RESPONSES_DELTA = "event: response.output_text.delta\n"
const RESPONSES_DONE = "event: response.completed\n"
const RESPONSES_FAILED = ["event: response.incomplete\n", "event: response.failed\n", "event: error\n"]

/** OpenAI Responses: text in `response.output_text.delta`'s `delta`; ends with `response.completed`, no `[DONE]`. */
const responses: Framing = {
  path: "/v1/responses",
  body: (model) => JSON.stringify({ model, stream: true, input: PROMPT }),
  content: (text, start, end) => {
    if (!text.startsWith(RESPONSES_DELTA, start)) return -1
    const delta = (eventData(text, start, end) as { delta?: unknown }).delta
    return typeof delta === "string" ? delta.length : -1
  },
  terminal: (text, start) =>
    text.startsWith(RESPONSES_DONE, start) ? 1 : RESPONSES_FAILED.some((e) => text.startsWith(e, start)) ? -1 : 0,
  terminalName: "response.completed"
}

const MESSAGES_DELTA = "event: content_block_delta\n"
const MESSAGES_DONE = "event: message_stop\n"
const MESSAGES_FAILED = "event: error\n"

/** Anthropic Messages: text in `content_block_delta`s of type `text_delta`; ends with `message_stop` (or `error`). */
const messages: Framing = {
  path: "/v1/messages",
  body: (model) => JSON.stringify({ model, max_tokens: 4096, stream: true, messages: MESSAGES }),
  content: (text, start, end) => {
    if (!text.startsWith(MESSAGES_DELTA, start)) return -1
    const delta = (eventData(text, start, end) as { delta?: { type?: unknown; text?: unknown } }).delta
    return delta?.type === "text_delta" && typeof delta.text === "string" ? delta.text.length : -1
  },
  terminal: (text, start) =>
    text.startsWith(MESSAGES_DONE, start) ? 1 : text.startsWith(MESSAGES_FAILED, start) ? -1 : 0,
  terminalName: "message_stop"
}

export const DIALECTS = { chat_completions: chatCompletions, responses, messages } as const
export type Dialect = keyof typeof DIALECTS

const post = (port: number, agent: Agent, body: string, path = chatCompletions.path): ClientRequest =>
  request({
    host: "127.0.0.1",
    port,
    method: "POST",
    path,
    agent,
    headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) }
  })

/**
 * Reads the complete SSE events of `text`: the content characters they carry
 * (a relay may join the deltas that arrived together into one chunk, so
 * tokens are counted from the text, not from the chunks) and the terminal
 * event (`onEnd` with the frame's `terminal` verdict); returns what is left over.
 */
const scan = (
  text: string,
  framing: Framing,
  onContent: (chars: number) => void,
  onEnd: (verdict: number, text: string, start: number, end: number) => void
): string => {
  // Chat Completions by direct calls: once the other dialects have run, `framing.content` is a polymorphic call
  // site, which cost this loop 10–15 % of its time on a chat stream (measured); the compare costs nothing.
  const chat = framing === chatCompletions
  let start = 0
  for (let end = text.indexOf("\n\n"); end >= 0; end = text.indexOf("\n\n", start)) {
    const chars = chat ? chatContent(text, start, end) : framing.content(text, start, end)
    if (chars >= 0) onContent(chars)
    else {
      const verdict = chat ? chatTerminal(text, start) : framing.terminal(text, start, end)
      if (verdict !== 0) onEnd(verdict, text, start, end)
    }
    start = end + 2
  }
  return start === 0 ? text : text.slice(start)
}

/** One streamed request: its tokens are `expectTokens` when its content has the expected length, else 0. */
export const streamOnce = (
  port: number,
  agent: Agent,
  body: string,
  timeoutMs: number,
  expectTokens: number,
  framing: Framing = chatCompletions
): Promise<Outcome> =>
  new Promise((resolve) => {
    const expectChars = completionText(expectTokens).length
    let chars = 0
    let contentChunks = 0
    let ttftMs = Number.NaN
    let reads = 0
    let head = ""
    let done = false
    /** The frame of a terminal event that says the stream failed. */
    let failed: string | undefined
    let settled = false
    const finish = (error: string | undefined) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      const problem = error ??
        (failed !== undefined
          ? `stream failed: ${failed}`
          : done
          ? undefined
          : `stream ended without ${framing.terminalName}`)
      // A stream without a single token usually carries the relay's error event: keep its start to show it.
      const tokens = chars === expectChars ? expectTokens : contentChunks
      const shown = problem ?? (chars === 0 ? `no tokens; body: ${head.replace(/\s+/g, " ")}` : undefined)
      resolve({ ok: problem === undefined, tokens, ttftMs, reads, error: shown })
    }
    const onContent = (n: number) => {
      if (contentChunks++ === 0) ttftMs = performance.now() - started
      chars += n
    }
    const onEnd = (verdict: number, text: string, start: number, end: number) => {
      if (verdict > 0) done = true
      else failed ??= text.slice(start, Math.min(end, start + 300)).replace(/\s+/g, " ")
    }
    const started = performance.now()
    const req = post(port, agent, body, framing.path)
    req.on("response", (res) => {
      if (res.statusCode !== 200) {
        res.resume()
        res.on("end", () => finish(`HTTP ${res.statusCode}`))
        return
      }
      let pending = ""
      res.setEncoding("utf8")
      res.on("data", (text: string) => {
        reads++
        if (head.length < 300) head = (head + text).slice(0, 300)
        pending = scan(pending + text, framing, onContent, onEnd)
      })
      res.on("end", () => finish(undefined))
      res.on("error", (e) => finish(`response: ${e.message}`))
      res.on("close", () => finish(res.complete ? undefined : "response closed early"))
    })
    req.on("error", (e) => finish(`request: ${e.message}`))
    const timer = setTimeout(() => req.destroy(new Error("timeout")), timeoutMs)
    req.end(body)
  })

/**
 * One non-stream request: ok when HTTP 200 and the body is a `chat.completion` whose content is `expectContent`;
 * its tokens are the usage's `completion_tokens` (or, without usage, the expected count when the text matched).
 */
export const completeOnce = (
  port: number,
  agent: Agent,
  body: string,
  timeoutMs: number,
  expect: { readonly content: string; readonly tokens: number }
): Promise<Outcome> =>
  new Promise((resolve) => {
    let settled = false
    let reads = 0
    const started = performance.now()
    const finish = (outcome: Omit<Outcome, "reads">) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve({ ...outcome, reads })
    }
    const fail = (error: string) => finish({ ok: false, tokens: 0, ttftMs: Number.NaN, error })
    const req = post(port, agent, body)
    req.on("response", (res) => {
      const parts: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => {
        reads++
        parts.push(chunk)
      })
      res.on("end", () => {
        const ms = performance.now() - started
        const text = Buffer.concat(parts).toString("utf8")
        if (res.statusCode !== 200) return fail(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`)
        try {
          const parsed = JSON.parse(text) as {
            object?: unknown
            choices?: ReadonlyArray<{ message?: { content?: unknown } }>
            usage?: { completion_tokens?: unknown }
          }
          const content = parsed.choices?.[0]?.message?.content
          if (parsed.object !== "chat.completion") return fail(`not a chat.completion: ${text.slice(0, 200)}`)
          if (content !== expect.content) {
            return fail(`content differs (${typeof content === "string" ? `${content.length} chars` : typeof content})`)
          }
          const usage = parsed.usage?.completion_tokens
          finish({ ok: true, tokens: typeof usage === "number" ? usage : expect.tokens, ttftMs: ms, error: undefined })
        } catch {
          fail(`body is not JSON: ${text.slice(0, 200)}`)
        }
      })
      res.on("error", (e) => fail(`response: ${e.message}`))
      res.on("close", () => {
        if (!res.complete) fail("response closed early")
      })
    })
    req.on("error", (e) => fail(`request: ${e.message}`))
    const timer = setTimeout(() => req.destroy(new Error("timeout")), timeoutMs)
    req.end(body)
  })

export interface LoadResult {
  readonly requests: number
  readonly ok: number
  readonly errors: number
  readonly tokens: number
  readonly elapsedMs: number
  /** TTFT of every good request, in ms. */
  readonly ttfts: ReadonlyArray<number>
  readonly clientReads: number
  /** The distinct error messages (at most 5). */
  readonly errorSamples: ReadonlyArray<string>
}

/**
 * `concurrency` closed-loop clients, each sending its next request when the last
 * stream ended, until `durationMs` has passed (requests in flight then finish).
 * With `staggerMs`, client i sends its first request i/concurrency of it after the
 * start: clients whose streams all last alike then stay that far apart, instead
 * of arriving together every time.
 */
export const runLoad = async (options: {
  readonly port: number
  readonly body: string
  readonly concurrency: number
  readonly durationMs: number
  readonly expectTokens: number
  /** Set for non-stream requests (the body says `stream: false`): the content every answer must have. */
  readonly expectContent?: string
  /** The API the streamed requests speak (and `body` is in); Chat Completions unless said. */
  readonly dialect?: Dialect
  /** The clients' first requests spread over this long (none: all at once). */
  readonly staggerMs?: number
}): Promise<LoadResult> => {
  const framing = DIALECTS[options.dialect ?? "chat_completions"]
  const agent = new Agent({ keepAlive: true })
  const ttfts: Array<number> = []
  const errorSamples = new Set<string>()
  let requests = 0
  let errors = 0
  let tokens = 0
  let clientReads = 0
  const started = performance.now()
  const deadline = started + options.durationMs
  const client = async (_: unknown, i: number) => {
    const stagger = ((options.staggerMs ?? 0) * i) / options.concurrency
    if (stagger > 0) await new Promise((resolve) => setTimeout(resolve, stagger))
    // A broken target fails fast: stop after a few errors instead of spinning to the deadline.
    while (performance.now() < deadline && errors < 50) {
      const outcome = options.expectContent === undefined
        ? await streamOnce(options.port, agent, options.body, 30_000, options.expectTokens, framing)
        : await completeOnce(options.port, agent, options.body, 30_000, {
          content: options.expectContent,
          tokens: options.expectTokens
        })
      requests++
      tokens += outcome.tokens
      clientReads += outcome.reads
      const error = outcome.tokens === options.expectTokens
        ? outcome.error
        : `${outcome.tokens} of ${options.expectTokens} tokens${outcome.error === undefined ? "" : `: ${outcome.error}`}`
      if (error === undefined) ttfts.push(outcome.ttftMs)
      else {
        errors++
        if (errorSamples.size < 5) errorSamples.add(error)
      }
    }
  }
  await Promise.all(Array.from({ length: options.concurrency }, client))
  const elapsedMs = performance.now() - started
  agent.destroy()
  return { requests, ok: requests - errors, errors, tokens, elapsedMs, ttfts, clientReads, errorSamples: [...errorSamples] }
}

export interface IdleStreams {
  readonly opened: number
  readonly failed: number
  /**
   * Hangs up every stream at once: destroys all their sockets in one synchronous loop (no I/O of this
   * process runs in between, so the relay gets the closes back to back). Returns the loop's duration, ms.
   */
  readonly close: () => number
}

/**
 * Opens `count` streams (in batches of `batch`) and returns once each has
 * delivered its first content token, or failed; the streams stay open until `close`.
 */
export const openIdleStreams = async (options: {
  readonly port: number
  readonly body: string
  readonly count: number
  readonly batch: number
  readonly timeoutMs: number
}): Promise<IdleStreams> => {
  const agent = new Agent({ keepAlive: false })
  const requests: Array<ClientRequest> = []
  const sockets: Array<Socket> = []
  const openOne = () =>
    new Promise<boolean>((resolve) => {
      const req = post(options.port, agent, options.body)
      requests.push(req)
      req.once("socket", (socket) => sockets.push(socket))
      const timer = setTimeout(() => resolve(false), options.timeoutMs)
      const settle = (ok: boolean) => {
        clearTimeout(timer)
        resolve(ok)
      }
      req.on("response", (res) => {
        if (res.statusCode !== 200) return settle(false)
        let pending = ""
        res.setEncoding("utf8")
        res.on("data", (text: string) => {
          pending = scan(pending + text, chatCompletions, () => settle(true), () => {})
        })
        res.on("error", () => settle(false))
        res.on("end", () => settle(false))
      })
      req.on("error", () => settle(false))
      req.end(options.body)
    })
  let opened = 0
  for (let i = 0; i < options.count; i += options.batch) {
    const results = await Promise.all(Array.from({ length: Math.min(options.batch, options.count - i) }, openOne))
    opened += results.filter((ok) => ok).length
  }
  return {
    opened,
    failed: options.count - opened,
    close: () => {
      const started = performance.now()
      for (const socket of sockets) socket.destroy()
      const ms = performance.now() - started
      // Requests that never got a socket (none, normally) and the agent's bookkeeping, after the sockets.
      for (const req of requests) req.destroy()
      agent.destroy()
      return ms
    }
  }
}
