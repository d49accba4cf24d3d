/**
 * `npm run bench:steps`: Effect steps per request — every effect the runtime evaluates, counted by a `Supervisor`
 * with op supervision on — for streamed and non-stream Chat Completions requests (32 tokens from an
 * OpenAI-compatible upstream) through the edge's own Node server, in this process. The per-request cost a CPU
 * profile spreads over the runtime's functions: each step is a few hundred nanoseconds.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as RuntimeFlagsPatch from "effect/RuntimeFlagsPatch"
import * as Supervisor from "effect/Supervisor"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as net from "node:net"
import { Edge } from "../src/index.js"
import { table } from "./table.js"

const TOKENS = 32
const REQUESTS = 300

const chunk = (delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
const answer = chunk({ role: "assistant", content: "" }) +
  Array.from({ length: TOKENS }, (_, i) => chunk({ content: ` t${i}` })).join("") + chunk({}, "stop") + "data: [DONE]\n\n"
/** The same answer as one JSON body: the edge asks for it for a non-stream request. */
const json = JSON.stringify({
  id: "c",
  object: "chat.completion",
  created: 1,
  model: "m",
  choices: [{
    index: 0,
    message: { role: "assistant", content: Array.from({ length: TOKENS }, (_, i) => ` t${i}`).join("") },
    finish_reason: "stop"
  }],
  usage: { prompt_tokens: 1, completion_tokens: TOKENS, total_tokens: 1 + TOKENS }
})

/** Counts every effect evaluated by the fibers it supervises. */
class StepCounter extends Supervisor.AbstractSupervisor<number> {
  count = 0
  readonly value = Effect.sync(() => this.count)
  override onEffect(): void {
    this.count++
  }
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (probe.address() as AddressInfo).port
      probe.close(() => resolve(port))
    })
  })

const main = async (): Promise<void> => {
  const upstream = http.createServer((req, res) => {
    const body: Array<Buffer> = []
    req.on("data", (b: Buffer) => body.push(b))
    req.on("end", () => {
      // OpenAI's default is not to stream: only an explicit `true` streams.
      if (/"stream"\s*:\s*true/.test(Buffer.concat(body).toString("utf8"))) {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.end(answer)
      } else {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(json)
      }
    })
  })
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve))
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`
  const port = await freePort()
  const config = await Effect.runPromise(Edge.decodeConfig({
    server: { host: "127.0.0.1", port },
    log: { level: "none" },
    models: [{ id: "m", provider: { type: "openai", baseUrl: upstreamUrl } }]
  }))
  const steps = new StepCounter()
  const fiber = Effect.runFork(
    Layer.launch(Edge.layerServer(config)).pipe(
      Effect.supervised(steps),
      Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
    )
  )
  const ask = async (stream: boolean) => {
    for (;;) {
      const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", stream, messages: [{ role: "user", content: "hi" }] })
      }).catch(() => undefined)
      if (response !== undefined) return response.text()
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  const perRequest = async (stream: boolean) => {
    for (let i = 0; i < 20; i++) await ask(stream)
    // The run's teardown finishes after the client read its answer: let it settle before and after counting.
    await new Promise((resolve) => setTimeout(resolve, 100))
    const before = steps.count
    for (let i = 0; i < REQUESTS; i++) await ask(stream)
    await new Promise((resolve) => setTimeout(resolve, 100))
    return (steps.count - before) / REQUESTS
  }
  const streamed = await perRequest(true)
  const nonStream = await perRequest(false)
  process.stdout.write(
    table(["request (32 tokens)", "Effect steps"], [["streamed", streamed.toFixed(0)], ["non-stream", nonStream.toFixed(0)]]) + "\n"
  )
  await Effect.runPromise(fiber.interruptAsFork(fiber.id()).pipe(Effect.zipRight(Effect.void)))
  upstream.close()
  process.exit(0)
}

void main()
