import { it } from "vitest"
import { startEdge } from "../support/edgeProcess.js"
import { startScenarioUpstream } from "../support/scenarios.js"
import { chunk } from "../support/fakeUpstream.js"
import { sleep } from "../support/e2e.js"
it("dbg", async () => {
  const upstream = await startScenarioUpstream()
  upstream.script("k", { kind: "stall", before: [chunk({ role: "assistant", content: "" })] })
  const edge = await startEdge({ config: { models: [{ id: "up", provider: { type: "openai", baseUrl: upstream.url } }] } })
  const c = new AbortController()
  const p = fetch(`${edge.baseURL}/chat/completions`, { method: "POST", body: JSON.stringify({ model: "up", messages: [{ role: "user", content: "k" }] }), signal: c.signal }).catch((e) => e)
  await sleep(300); c.abort(); await p; await sleep(1000)
  console.log((await (await fetch(`${edge.url}/metrics`)).text()).split("\n").filter((l) => l.startsWith("iop_") && !l.includes("process") && !l.includes("nodejs")).join("\n"))
  const t = Date.now()
  console.log("exit", await edge.stop(), Date.now() - t)
  console.log(edge.stdout())
  await upstream.close()
}, 30000)
