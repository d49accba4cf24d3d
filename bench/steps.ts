/**
 * `npm run bench:steps`: Effect steps per request — every effect the runtime evaluates, counted by a `Supervisor`
 * with op supervision on — for streamed and non-stream Chat Completions requests (32 tokens from an
 * OpenAI-compatible upstream) and Responses requests (not stored, and stored in the default in-memory store)
 * through the edge's own Node server, in this process. The per-request cost a CPU
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

/** `STEPS_BY=1`: also which effects they are (op and the source of its function), to find who makes them. */
const by = process.env["STEPS_BY"] === "1"
/** `STEPS_TRACED=1`: with `telemetry.otlp` set (spans exported to a local sink), what tracing costs when it is on. */
const traced = process.env["STEPS_TRACED"] === "1"

const describe = (effect: object): string => {
  const fields = effect as Record<string, unknown>
  const fn = [fields["effect_instruction_i0"], fields["effect_instruction_i1"], fields["effect_instruction_i2"]]
    .concat(fields["commit"]).find((f) => typeof f === "function")
  const source = typeof fn === "function" ? fn.toString().replace(/\s+/g, " ").slice(0, 110) : ""
  if (source !== "") return `${String(fields["_op"])} ${source}`
  const value = fields["effect_instruction_i0"]
  const shape = value === undefined
    ? "undefined"
    : value === null || typeof value !== "object"
    ? typeof value
    : `${value.constructor.name}{${Object.keys(value).slice(0, 6).join(",")}}`
  return `${String(fields["_op"])} ${effect.constructor.name} ${shape}`
}

/** Counts every effect evaluated by the fibers it supervises. */
class StepCounter extends Supervisor.AbstractSupervisor<number> {
  count = 0
  counting = false
  readonly kinds = new Map<string, number>()
  readonly value = Effect.sync(() => this.count)
  override onEffect(_fiber: unknown, effect: object): void {
    this.count++
    if (by && this.counting) {
      const key = describe(effect)
      this.kinds.set(key, (this.kinds.get(key) ?? 0) + 1)
    }
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
      const text = Buffer.concat(body).toString("utf8")
      if (/"stream"\s*:\s*true/.test(text)) {
        res.writeHead(200, { "content-type": "text/event-stream" })
        // `slow`: accepted at once, the tokens 20 ms later (a prefill): the stream's opening grace runs.
        if (text.includes('"model":"slow"')) {
          res.write(chunk({ role: "assistant", content: "" }))
          setTimeout(() => res.end(answer), 20)
        } else res.end(answer)
      } else {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(json)
      }
    })
  })
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve))
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`
  const port = await freePort()
  const sink = http.createServer((req, res) => {
    req.resume()
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"))
  })
  await new Promise<void>((resolve) => sink.listen(0, "127.0.0.1", resolve))
  const config = await Effect.runPromise(Edge.decodeConfig({
    server: { host: "127.0.0.1", port },
    log: { level: "none" },
    ...(traced ? { telemetry: { otlp: { endpoint: `http://127.0.0.1:${(sink.address() as AddressInfo).port}` } } } : {}),
    models: ["m", "slow"].map((id) => ({ id, provider: { type: "openai", baseUrl: upstreamUrl } }))
  }))
  const steps = new StepCounter()
  const fiber = Effect.runFork(
    Layer.launch(Edge.layerServer(config)).pipe(
      Effect.supervised(steps),
      Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
    )
  )
  /** A Chat Completions request, or (`store` given) a Responses one: `store: false`, or stored (OpenAI's default). */
  const ask = async (stream: boolean, model = "m", store?: boolean) => {
    const [path, body] = store === undefined
      ? ["chat/completions", { model, stream, messages: [{ role: "user", content: "hi" }] }]
      : ["responses", { model, stream, input: "hi", ...(store ? {} : { store: false }) }]
    for (;;) {
      const response = await fetch(`http://127.0.0.1:${port}/v1/${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body)
      }).catch(() => undefined)
      if (response !== undefined) return response.text()
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  const perRequest = async (stream: boolean, model = "m", store?: boolean) => {
    for (let i = 0; i < 20; i++) await ask(stream, model, store)
    // The run's teardown finishes after the client read its answer: let it settle before and after counting.
    await new Promise((resolve) => setTimeout(resolve, 100))
    const before = steps.count
    steps.kinds.clear()
    steps.counting = true
    for (let i = 0; i < REQUESTS; i++) await ask(stream, model, store)
    await new Promise((resolve) => setTimeout(resolve, 100))
    steps.counting = false
    if (by) {
      const top = [...steps.kinds.entries()].sort((a, b) => b[1] - a[1]).slice(0, 80)
      process.stdout.write(`${stream ? "streamed" : "non-stream"}: steps per request by effect\n`)
      for (const [key, n] of top) process.stdout.write(`${(n / REQUESTS).toFixed(1).padStart(7)}  ${key}\n`)
    }
    return (steps.count - before) / REQUESTS
  }
  const streamed = await perRequest(true)
  const nonStream = await perRequest(false)
  const slow = await perRequest(true, "slow")
  const responsesUnstored = await perRequest(true, "m", false)
  const responsesStored = await perRequest(true, "m", true)
  const responsesWhole = await perRequest(false, "m", true)
  process.stdout.write(
    table(["request (32 tokens)", "Effect steps"], [
      ["streamed", streamed.toFixed(0)],
      ["non-stream", nonStream.toFixed(0)],
      ["streamed, first token 20 ms after the accept", slow.toFixed(0)],
      ["Responses streamed, store: false", responsesUnstored.toFixed(0)],
      ["Responses streamed, stored (the default)", responsesStored.toFixed(0)],
      ["Responses non-stream, stored", responsesWhole.toFixed(0)]
    ]) + "\n"
  )
  await Effect.runPromise(fiber.interruptAsFork(fiber.id()).pipe(Effect.zipRight(Effect.void)))
  upstream.close()
  sink.close()
  process.exit(0)
}

void main()
