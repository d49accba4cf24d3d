import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { playScript, type Script } from "../../support/fakeUpstream.js"
import { lastUserText } from "../../support/scenarios.js"

/**
 * A fake OpenAI-compatible upstream with the scripts of test/support/fakeUpstream.ts
 * (sse / json / stall / reset) that also follows every request to its end:
 * `completed` (the script ran to its end), `reset` (the script reset the
 * connection), `aborted` (the edge closed the connection first) or still
 * `open`. That is what "no upstream request left open" is checked against.
 *
 * Requests are routed by their last user message: an exact key registered
 * with `script`, else the longest registered prefix (`prefix`). Unknown keys
 * get a 500 JSON error.
 */

export type RequestEnd = "open" | "completed" | "reset" | "aborted"

export interface TrackedRequest {
  readonly key: string
  readonly startedAt: number
  endedAt: number | undefined
  end: RequestEnd
}

export interface TrackedUpstream {
  /** Base URL ending in `/v1`. */
  readonly url: string
  readonly requests: Array<TrackedRequest>
  /** `Date.now()` of every connection the edge closed before its response ended (as in fakeUpstream.ts). */
  readonly aborted: Array<{ readonly at: number }>
  readonly script: (key: string, script: Script) => string
  readonly prefix: (prefix: string, script: Script | ((key: string) => Script)) => void
  readonly requestsFor: (keyOrPrefix: string) => ReadonlyArray<TrackedRequest>
  /** Requests whose response has not ended yet. */
  readonly open: (keyPrefix?: string) => ReadonlyArray<TrackedRequest>
  /** Forgets the recorded requests (long soak phases). */
  readonly clear: () => void
  readonly close: () => Promise<void>
}

const readBody = (req: http.IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const parts: Array<Buffer> = []
    req.on("data", (part: Buffer) => parts.push(part))
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")))
    req.on("error", reject)
  })

export const startTrackedUpstream = async (
  options: {
    /** The server's keep-alive timeout (Node's default, 5 s, as llama.cpp and uvicorn use). */
    readonly keepAliveTimeoutMs?: number
  } = {}
): Promise<TrackedUpstream> => {
  let requests: Array<TrackedRequest> = []
  const aborted: Array<{ at: number }> = []
  const exact = new Map<string, Script>()
  const prefixes: Array<readonly [string, Script | ((key: string) => Script)]> = []

  const scriptFor = (key: string): Script => {
    const found = exact.get(key)
    if (found !== undefined) return found
    let best: readonly [string, Script | ((key: string) => Script)] | undefined
    for (const entry of prefixes) if (key.startsWith(entry[0]) && (best === undefined || entry[0].length > best[0].length)) best = entry
    if (best === undefined) {
      return { kind: "json", status: 500, body: { error: { message: `no script for ${JSON.stringify(key)}`, type: "test_error" } } }
    }
    return typeof best[1] === "function" ? best[1](key) : best[1]
  }

  const serve = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const path = (req.url ?? "/").split("?")[0] ?? "/"
    const text = await readBody(req)
    if (req.method !== "POST" || path !== "/v1/chat/completions") {
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "no route", type: "not_found" } }))
      return
    }
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      body = undefined
    }
    const key = lastUserText(body) ?? ""
    const tracked: TrackedRequest = { key, startedAt: Date.now(), endedAt: undefined, end: "open" }
    requests.push(tracked)
    const finish = (end: RequestEnd) => {
      if (tracked.end !== "open") return
      tracked.end = end
      tracked.endedAt = Date.now()
      if (end === "aborted") aborted.push({ at: tracked.endedAt })
    }
    res.on("close", () => finish(res.writableFinished ? "completed" : "aborted"))

    await playScript(req, res, scriptFor(key), () => finish("reset"))
  }

  const server = http.createServer((req, res) => {
    serve(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" })
      res.end(String(error))
    })
  })
  server.keepAliveTimeout = options.keepAliveTimeoutMs ?? 5_000
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  const matching = (p: string | undefined) => requests.filter((r) => p === undefined || r.key === p || r.key.startsWith(p))
  return {
    url: `http://127.0.0.1:${port}/v1`,
    get requests() {
      return requests
    },
    aborted,
    script: (key, script) => {
      exact.set(key, script)
      return key
    },
    prefix: (p, script) => {
      prefixes.push([p, script])
    },
    requestsFor: (p) => matching(p),
    open: (p) => matching(p).filter((r) => r.end === "open"),
    clear: () => {
      requests = requests.filter((r) => r.end === "open")
      aborted.length = 0
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
  }
}
