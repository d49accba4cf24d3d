import { it } from "vitest"
import * as http from "node:http"
import { startEdge } from "../support/edgeProcess.js"
it("dbg", async () => {
  const edge = await startEdge({ config: { server: { maxBodyBytes: 16384 }, models: [{ id: "echo", provider: { type: "echo", tokenDelayMs: 0 } }] } })
  const text = JSON.stringify({ model: "echo", messages: [{ role: "user", content: "y".repeat(40000) }] })
  const res = await new Promise<string>((resolve) => {
    const req = http.request(`${edge.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", "transfer-encoding": "chunked" } }, (r) => {
      let b = ""; r.on("data", (d) => (b += d)); r.on("end", () => resolve(`${r.statusCode} ${JSON.stringify(r.headers)} ${b}`))
    })
    req.on("error", (e) => resolve("error " + e.message))
    for (let i = 0; i < text.length; i += 4096) req.write(text.slice(i, i + 4096))
    req.end()
  })
  console.log(res)
  const t = Date.now()
  console.log("exit", await edge.stop(), Date.now() - t)
  console.log(edge.stdout())
}, 30000)
