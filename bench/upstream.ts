/**
 * The fake upstream, a child process: an OpenAI-compatible
 * `POST /v1/chat/completions` that streams `TOKENS` content chunks, one token
 * per SSE event, then a finish chunk, a usage chunk and `[DONE]`. The request's
 * `model` picks the pacing: `bench` writes every event at once (no delay),
 * `paced` waits PACE_MS between events, like a fast model (so a relay that keeps
 * up gets each event on its own read), `stall` sends the role chunk and one
 * token, then holds the stream open.
 *
 * A request with `"stream": false` gets one `chat.completion` JSON body instead
 * (content = the TOKENS tokens joined, usage), at once for `bench` and `paced`
 * alike; `stall` sends the headers and never the body. `stats` counts both
 * kinds of request, so the bench can tell how a relay asked.
 */
import { createServer, type ServerResponse } from "node:http"
import { completionText, token } from "./fakeText.js"
import { answer, exitWithParent } from "./ipc.js"

const TOKENS = Number(process.argv[2] ?? "256")
const PACE_MS = Number(process.argv[3] ?? "5")

const event = (model: string, fields: Record<string, unknown>): string =>
  `data: ${
    JSON.stringify({
      id: "chatcmpl-bench",
      object: "chat.completion.chunk",
      created: 1_700_000_000,
      model,
      system_fingerprint: null,
      ...fields
    })
  }\n\n`

const choice = (delta: Record<string, unknown>, finish: string | null) => ({
  choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }]
})

// The upstream's own cost is not measured, but it shares two cores with the proxy: serialise once.
const script = (model: string) => ({
  head: event(model, choice({ role: "assistant", content: "" }, null)),
  tokens: Array.from({ length: TOKENS }, (_, i) => event(model, choice({ content: token(i) }, null))),
  tail: [
    event(model, choice({}, "stop")),
    event(model, { choices: [], usage: { prompt_tokens: 12, completion_tokens: TOKENS, total_tokens: 12 + TOKENS } }),
    "data: [DONE]\n\n"
  ],
  json: Buffer.from(JSON.stringify({
    id: "chatcmpl-bench",
    object: "chat.completion",
    created: 1_700_000_000,
    model,
    system_fingerprint: null,
    choices: [{ index: 0, message: { role: "assistant", content: completionText(TOKENS) }, logprobs: null, finish_reason: "stop" }],
    usage: { prompt_tokens: 12, completion_tokens: TOKENS, total_tokens: 12 + TOKENS }
  }))
})
const scripts = new Map(["bench", "paced", "stall"].map((model) => [model, script(model)]))

let requests = 0
/** Requests that asked for `"stream": false`. */
let jsonRequests = 0
/** `stall` requests whose response is still open (streamed or not). */
let openStalls = 0

/** Waits for `drain`, or for `close` when the reader has gone. */
const writable = (res: ServerResponse): Promise<void> =>
  new Promise((resolve) => {
    const done = () => {
      res.off("drain", done)
      res.off("close", done)
      resolve()
    }
    res.on("drain", done)
    res.on("close", done)
  })

const pause = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, PACE_MS))

const holdOpen = (res: ServerResponse): void => {
  openStalls++
  res.on("close", () => openStalls--)
}

const complete = (res: ServerResponse, model: string): void => {
  const s = scripts.get(model) ?? scripts.get("bench")!
  if (model === "stall") {
    res.writeHead(200, { "content-type": "application/json" })
    res.flushHeaders()
    holdOpen(res)
    return
  }
  res.writeHead(200, { "content-type": "application/json", "content-length": s.json.length }).end(s.json)
}

const stream = async (res: ServerResponse, model: string): Promise<void> => {
  const s = scripts.get(model) ?? scripts.get("bench")!
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
  res.write(s.head)
  if (model === "stall") {
    holdOpen(res)
    res.write(s.tokens[0])
    return
  }
  for (const part of [...s.tokens, ...s.tail]) {
    if (res.destroyed) return
    if (!res.write(part)) await writable(res)
    if (model === "paced") await pause()
  }
  res.end()
}

// Node's default 5 s keep-alive races with relays reusing a socket that sat idle while another target ran
// ("other side closed", 502): both relays hit it. Keep idle upstream sockets longer than a bench run.
const server = createServer({ keepAliveTimeout: 120_000 }, (req, res) => {
  const body: Array<Buffer> = []
  req.on("data", (chunk: Buffer) => body.push(chunk))
  req.on("end", () => {
    requests++
    let model = "bench"
    let streamed = true
    try {
      const parsed: unknown = JSON.parse(Buffer.concat(body).toString("utf8"))
      if (typeof parsed === "object" && parsed !== null) {
        if ("model" in parsed && typeof parsed.model === "string") model = parsed.model
        // OpenAI's default is not to stream: only an explicit `true` streams.
        streamed = "stream" in parsed && parsed.stream === true
      }
    } catch {
      res.writeHead(400, { "content-type": "application/json" }).end("{\"error\":{\"message\":\"bad json\"}}")
      return
    }
    if (streamed) void stream(res, model)
    else {
      jsonRequests++
      complete(res, model)
    }
  })
})

server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  if (address !== null && typeof address === "object") process.send?.({ type: "listening", port: address.port })
})

answer({ stats: () => ({ requests, jsonRequests, openStalls }) })
exitWithParent()
