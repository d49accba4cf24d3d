/**
 * The baseline, a child process: the least a relay that understands its
 * stream has to do. It forwards the request upstream, parses every SSE event
 * (`JSON.parse`), re-serialises it (`JSON.stringify`) and writes what one
 * upstream read completed as one write to the client. Client gone → upstream
 * request aborted. A non-stream request (the upstream answers
 * `application/json`) is passed through whole: the body collected, parsed and
 * re-serialised, written with its length. The request body is forwarded as it
 * came: the upstream's answer, not the request, picks the path.
 */
import { Agent, createServer, request } from "node:http"
import { StringDecoder } from "node:string_decoder"
import { answer, exitWithParent } from "./ipc.js"

const upstreamPort = Number(process.argv[2])
const agent = new Agent({ keepAlive: true })

let reads = 0
let events = 0
let writes = 0
let completions = 0

const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
  const body: Array<Buffer> = []
  req.on("data", (chunk: Buffer) => body.push(chunk))
  req.on("end", () => {
    const payload = Buffer.concat(body)
    const upstream = request(
      {
        host: "127.0.0.1",
        port: upstreamPort,
        method: "POST",
        path: "/v1/chat/completions",
        agent,
        headers: { "content-type": "application/json", "content-length": payload.length, accept: "text/event-stream" }
      },
      (upRes) => {
        if (upRes.statusCode !== 200) {
          upRes.resume()
          res.writeHead(502, { "content-type": "application/json" }).end("{\"error\":{\"message\":\"upstream failed\"}}")
          return
        }
        if ((upRes.headers["content-type"] ?? "").startsWith("application/json")) {
          const parts: Array<Buffer> = []
          upRes.on("data", (chunk: Buffer) => parts.push(chunk))
          upRes.on("end", () => {
            completions++
            const out = JSON.stringify(JSON.parse(Buffer.concat(parts).toString("utf8")))
            res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) }).end(out)
          })
          upRes.on("error", () => res.destroy())
          return
        }
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
        const decoder = new StringDecoder("utf8")
        let pending = ""
        upRes.on("data", (chunk: Buffer) => {
          reads++
          pending += decoder.write(chunk)
          let out = ""
          let start = 0
          for (let end = pending.indexOf("\n\n"); end >= 0; end = pending.indexOf("\n\n", start)) {
            const line = pending.slice(start, end)
            start = end + 2
            if (!line.startsWith("data: ")) continue
            const data = line.slice(6)
            events++
            out += data === "[DONE]" ? "data: [DONE]\n\n" : `data: ${JSON.stringify(JSON.parse(data))}\n\n`
          }
          pending = pending.slice(start)
          if (out === "") return
          writes++
          if (!res.write(out)) {
            upRes.pause()
            res.once("drain", () => upRes.resume())
          }
        })
        upRes.on("end", () => res.end())
        upRes.on("error", () => res.destroy())
      }
    )
    upstream.on("error", () => {
      if (!res.headersSent) res.writeHead(502)
      res.end()
    })
    res.on("close", () => {
      if (!res.writableFinished) upstream.destroy()
    })
    upstream.end(payload)
  })
})

server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  if (address !== null && typeof address === "object") process.send?.({ type: "listening", port: address.port })
})

answer({ stats: () => ({ reads, events, writes, completions }) })
exitWithParent()
