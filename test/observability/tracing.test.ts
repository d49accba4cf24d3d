/**
 * Traces, as an operator gets them from `iop edge` (`telemetry.otlp.endpoint`) and as an app gets them in its own
 * Effect tracer: request → run → attempt spans with the GenAI attributes, the trace continued by the upstream
 * (its `traceparent`), the per-request log lines carrying the trace. Through the edge's own Node server, to a fake
 * upstream and an in-process OTLP receiver.
 */
import * as HttpApp from "@effect/platform/HttpApp"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Schedule from "effect/Schedule"
import * as Tracer from "effect/Tracer"
import { parseTraceparent } from "../../src/common/traceparent.js"
import { ChatCompletions, Edge } from "../../src/index.js"
import * as NatsEdge from "../../src/nats.js"
import { layerNode } from "../../src/nats.js"
import { completionTokens, type FakeUpstream, type Script, startFakeUpstream, textStream } from "../support/fakeUpstream.js"
import { freePort, type NatsServer, startNatsServer } from "../support/natsServer.js"
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../support/otlpReceiver.js"

const SERVER = 2
const CLIENT = 3
const INTERNAL = 1

const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
const CLIENT_SPAN = "00f067aa0ba902b7"

interface LogLine {
  readonly message: string
  readonly annotations: Readonly<Record<string, unknown>>
}

/** Every line the edge logs, with its annotations. */
const captureLogs = (lines: Array<LogLine>) =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ annotations, message }) => {
      lines.push({
        message: String(Array.isArray(message) ? message[0] : message),
        annotations: Object.fromEntries(HashMap.toEntries(annotations))
      })
    })
  )

/** `iop edge` for a config (`Edge.layerServer`, what the CLI runs) on a free port, for the scope. */
const serveEdge = (input: Edge.EdgeConfigInput) =>
  Effect.gen(function* () {
    const port = yield* Effect.promise(freePort)
    const config = yield* Edge.decodeConfig({ ...input, server: { host: "127.0.0.1", port } })
    yield* Layer.build(Edge.layerServer(config))
    return `http://127.0.0.1:${port}`
  }).pipe(Effect.orDie)

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body)
    })
    return { status: response.status, text: await response.text() }
  })

const named = (spans: ReadonlyArray<ReceivedSpan>, name: string): Array<ReceivedSpan> =>
  spans.filter((s) => s.name === name)

const one = (spans: ReadonlyArray<ReceivedSpan>, name: string): ReceivedSpan => {
  const found = named(spans, name)
  expect(found.map((s) => s.name), `one span named ${name}`).toEqual([name])
  return found[0]!
}

const WEATHER = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
  }
} as const

/** A whole (non-stream) answer calling `get_weather` with these arguments. */
const weatherCall = (args: object): Script => ({
  kind: "json",
  status: 200,
  body: {
    id: "chatcmpl-fake",
    object: "chat.completion",
    created: 1,
    model: "strict",
    choices: [{
      index: 0,
      message: {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: JSON.stringify(args) } }]
      },
      finish_reason: "tool_calls"
    }],
    usage: completionTokens(11, 4)
  }
})

describe("OpenTelemetry traces from iop edge (telemetry.otlp)", () => {
  let receiver: OtlpReceiver
  let upstream: FakeUpstream
  beforeAll(async () => {
    receiver = await startOtlpReceiver()
    // A strict request's first answer calls the tool with arguments its schema refuses; the replay's are valid.
    let strictCalls = 0
    upstream = await startFakeUpstream((request) => {
      const body = request.body as { readonly model?: string }
      if (body.model === "strict") return weatherCall(strictCalls++ % 2 === 0 ? { city: 42 } : { city: "Paris" })
      return { kind: "sse", events: textStream(["Hel", "lo"], { usage: completionTokens(7, 2) }) }
    })
  })
  afterAll(async () => {
    await upstream.close()
    await receiver.close()
  })

  const config = (): Edge.EdgeConfigInput => ({
    telemetry: { serviceName: "edge-under-test", otlp: { endpoint: receiver.endpoint, headers: { "x-collector-key": "k1" } } },
    runs: { toolValidationAttempts: 2 },
    models: [
      { id: "fake", provider: { type: "openai", baseUrl: upstream.url } },
      { id: "strict", provider: { type: "openai", baseUrl: upstream.url, constraints: "none" }, output: { strict: true } }
    ]
  })

  /** The spans of one trace, once the edge is closed (its exporter flushes as it closes). */
  const traceOf = (traceId: string) => receiver.spans().filter((s) => s.traceId === traceId)

  it.live("a streamed request: its span continues the client's traceparent; run and attempt spans carry the GenAI attributes; the upstream, the logs continue it", () =>
    Effect.gen(function* () {
      const lines: Array<LogLine> = []
      const sent = upstream.requests.length
      const answer = yield* Effect.scoped(
        Effect.flatMap(serveEdge(config()), (url) =>
          post(url, {
            model: "fake",
            stream: true,
            max_tokens: 64,
            temperature: 0.5,
            messages: [{ role: "user", content: "hi" }]
          }, { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` }))
      ).pipe(Effect.provide(captureLogs(lines)))
      expect(answer.status).toBe(200)
      expect(answer.text).toContain("Hel")

      const spans = traceOf(CLIENT_TRACE)
      const request = one(spans, "POST /v1/chat/completions")
      const run = one(spans, "chat fake")
      const attempt = one(spans, "iop.attempt")
      expect(request).toMatchObject({ kind: SERVER, parentSpanId: CLIENT_SPAN, service: "edge-under-test", status: { code: 1 } })
      expect(request.attributes).toMatchObject({
        "http.request.method": "POST",
        "http.route": "/v1/chat/completions",
        "http.response.status_code": 200
      })
      expect(run).toMatchObject({ kind: CLIENT, parentSpanId: request.spanId, status: { code: 1 } })
      expect(run.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "iop",
        "gen_ai.system": "iop",
        "gen_ai.request.model": "fake",
        "gen_ai.request.max_tokens": 64,
        "gen_ai.request.temperature": 0.5,
        "gen_ai.response.model": "fake",
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 2,
        "iop.api": "chat_completions",
        "iop.stream": true,
        "iop.node": "embedded",
        "iop.attempt": 1,
        "iop.outcome": "success",
        "iop.tool_calls": 0
      })
      expect(run.attributes["gen_ai.response.id"]).toMatch(/^run_/)
      expect(run.attributes["iop.ttft_ms"]).toEqual(expect.any(Number))
      expect(attempt).toMatchObject({ kind: INTERNAL, parentSpanId: run.spanId, status: { code: 1 } })
      expect(attempt.attributes).toMatchObject({
        "iop.attempt": 1,
        "iop.run_id": run.attributes["gen_ai.response.id"],
        "iop.outcome": "success",
        "gen_ai.usage.output_tokens": 2
      })
      // Children end within their parents.
      expect(BigInt(attempt.endTimeUnixNano)).toBeLessThanOrEqual(BigInt(run.endTimeUnixNano))
      expect(BigInt(run.endTimeUnixNano)).toBeLessThanOrEqual(BigInt(request.endTimeUnixNano))

      // The upstream continues the attempt's span.
      const seen = parseTraceparent(String(upstream.requests[sent]?.headers["traceparent"]))
      expect(seen).toEqual({ traceId: CLIENT_TRACE, spanId: attempt.spanId, sampled: true })
      // The configured headers go with every export.
      expect(receiver.headers.every((h) => h["x-collector-key"] === "k1")).toBe(true)

      const finished = lines.find((l) => l.message === "run finished")
      expect(finished?.annotations).toMatchObject({ trace_id: CLIENT_TRACE, span_id: attempt.spanId })
      const access = lines.find((l) => l.message === "http request")
      expect(access?.annotations).toMatchObject({ trace_id: CLIENT_TRACE, span_id: request.spanId })
    }))

  it.live("a strict request replayed: one run span, an attempt span per run (the replay's naming the run it replays), each its upstream request's parent", () =>
    Effect.gen(function* () {
      const sent = upstream.requests.length
      const answer = yield* Effect.scoped(
        Effect.flatMap(serveEdge(config()), (url) =>
          post(url, { model: "strict", messages: [{ role: "user", content: "weather?" }], tools: [WEATHER] }))
      ).pipe(Effect.provide(captureLogs([])))
      expect(answer.status).toBe(200)
      expect(JSON.parse(answer.text).choices[0].message.tool_calls[0].function.arguments).toBe(`{"city":"Paris"}`)

      const calls = upstream.requests.slice(sent)
      expect(calls).toHaveLength(2)
      const traceId = parseTraceparent(String(calls[0]?.headers["traceparent"]))?.traceId ?? ""
      const spans = traceOf(traceId)
      const request = one(spans, "POST /v1/chat/completions")
      expect(request.parentSpanId).toBeUndefined()
      const run = one(spans, "chat strict")
      expect(run.parentSpanId).toBe(request.spanId)
      const attempts = named(spans, "iop.attempt").sort((a, b) => Number(a.attributes["iop.attempt"]) - Number(b.attributes["iop.attempt"]))
      expect(attempts.map((a) => a.parentSpanId)).toEqual([run.spanId, run.spanId])
      const [first, second] = attempts
      expect(first?.attributes).toMatchObject({
        "iop.attempt": 1,
        "iop.outcome": "tool_validation_error",
        "error.type": "ToolValidationFailed"
      })
      expect(first?.status.code).toBe(2)
      expect(second?.attributes).toMatchObject({
        "iop.attempt": 2,
        "iop.failed_run_id": first?.attributes["iop.run_id"],
        "iop.outcome": "success",
        "gen_ai.response.finish_reasons": ["tool_calls"]
      })
      expect(second?.attributes["iop.reason"]).toEqual(expect.any(String))
      // The run is the request's: the replay's answer, and no error left from the first attempt.
      expect(run.attributes).toMatchObject({
        "iop.attempt": 2,
        "iop.outcome": "success",
        "iop.tool_calls": 1,
        "gen_ai.response.id": second?.attributes["iop.run_id"],
        "gen_ai.usage.input_tokens": 11
      })
      expect(run.attributes["error.type"]).toBeUndefined()
      expect(run.status.code).toBe(1)
      expect(calls.map((c) => parseTraceparent(String(c.headers["traceparent"]))?.spanId)).toEqual(attempts.map((a) => a.spanId))
    }))

  it.live("telemetry off: no span, no traceparent to the upstream, no trace ids in the logs", () =>
    Effect.gen(function* () {
      const lines: Array<LogLine> = []
      const before = receiver.spans().length
      const sent = upstream.requests.length
      const { telemetry: _, ...off } = config()
      const answer = yield* Effect.scoped(
        Effect.flatMap(serveEdge(off), (url) =>
          post(url, { model: "fake", stream: true, messages: [{ role: "user", content: "hi" }] }, {
            traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`
          }))
      ).pipe(Effect.provide(captureLogs(lines)))
      expect(answer.status).toBe(200)
      expect(receiver.spans().length).toBe(before)
      expect(upstream.requests[sent]?.headers["traceparent"]).toBeUndefined()
      expect(lines.find((l) => l.message === "run finished")?.annotations["trace_id"]).toBeUndefined()
      expect(lines.find((l) => l.message === "http request")?.annotations["trace_id"]).toBeUndefined()
    }))

  it.live("probes and scrapes get no span", () =>
    Effect.gen(function* () {
      const before = receiver.spans().length
      yield* Effect.scoped(
        Effect.flatMap(serveEdge(config()), (url) =>
          Effect.promise(async () => {
            await (await fetch(`${url}/healthz`)).text()
            await (await fetch(`${url}/metrics`)).text()
          }))
      ).pipe(Effect.provide(captureLogs([])))
      expect(receiver.spans().slice(before)).toEqual([])
    }))
})

/** A tracer that keeps its spans, as an app's own would export them. */
const recordingTracer = (spans: Array<Tracer.Span>): Tracer.Tracer =>
  Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const attributes = new Map<string, unknown>()
      const span: Tracer.Span = {
        _tag: "Span",
        name,
        spanId: Math.random().toString(16).slice(2, 10).padEnd(16, "0"),
        traceId: parent._tag === "Some" ? parent.value.traceId : "0af7651916cd43dd8448eb211c80319c",
        parent,
        context,
        status: { _tag: "Started", startTime },
        attributes,
        links,
        sampled: true,
        kind,
        end(endTime, exit) {
          ;(span as { status: Tracer.SpanStatus }).status = { _tag: "Ended", startTime, endTime, exit }
        },
        attribute(key, value) {
          attributes.set(key, value)
        },
        event() {},
        addLinks() {}
      }
      spans.push(span)
      return span
    },
    context: (f) => f()
  })

describe("traces in an app's own tracer (the library)", () => {
  let upstream: FakeUpstream
  beforeAll(async () => {
    upstream = await startFakeUpstream({ kind: "sse", events: textStream(["ok"], { usage: completionTokens(3, 1) }) })
  })
  afterAll(() => upstream.close())

  const edge = () => Edge.layer({ log: { level: "none" }, models: [{ id: "m", provider: { type: "openai", baseUrl: upstream.url } }] })

  const ask = ChatCompletions.request({ model: "m", messages: [{ role: "user", content: "hi" }] }).pipe(
    Effect.flatMap(ChatCompletions.create)
  )

  it.live("a typed call in the app's tracer: its span, the run's and the attempt's, the upstream continuing the attempt", () =>
    Effect.gen(function* () {
      const spans: Array<Tracer.Span> = []
      const sent = upstream.requests.length
      const answer = yield* ask.pipe(Effect.provide(edge()), Effect.withTracer(recordingTracer(spans)))
      expect(answer.choices[0]?.message.content).toBe("ok")
      const byName = (name: string) => spans.filter((s) => s.name === name)
      const call = byName("ChatCompletions.create")[0]
      const run = byName("chat m")[0]
      const attempt = byName("iop.attempt")[0]
      expect([call, run, attempt].every((s) => s?.status._tag === "Ended")).toBe(true)
      expect(run?.parent).toMatchObject({ _tag: "Some", value: { spanId: call?.spanId } })
      expect(attempt?.parent).toMatchObject({ _tag: "Some", value: { spanId: run?.spanId } })
      expect(run?.kind).toBe("client")
      expect(Object.fromEntries(run?.attributes ?? [])).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.usage.input_tokens": 3,
        "iop.outcome": "success",
        "iop.stream": false
      })
      const seen = parseTraceparent(String(upstream.requests[sent]?.headers["traceparent"]))
      expect(seen).toMatchObject({ traceId: call?.traceId, spanId: attempt?.spanId })
    }))

  it.live("routes mounted in an app that traces: the request's span is a child of the app's server span (which read the client's traceparent)", () =>
    Effect.gen(function* () {
      const spans: Array<Tracer.Span> = []
      const response = yield* Effect.gen(function* () {
        const app = yield* Edge.httpApp
        const handler = HttpApp.toWebHandlerRuntime(yield* Effect.runtime<Layer.Layer.Success<ReturnType<typeof edge>>>())(app)
        return yield* Effect.promise(async () => {
          const answer = await handler(new Request("http://127.0.0.1/v1/chat/completions", {
            method: "POST",
            headers: { "content-type": "application/json", traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` },
            body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] })
          }))
          return { status: answer.status, text: await answer.text() }
        })
      }).pipe(Effect.provide(edge()), Effect.withTracer(recordingTracer(spans)))
      expect(response.status).toBe(200)
      const server = spans.find((s) => s.name === "http.server POST")
      const request = spans.find((s) => s.name === "POST /v1/chat/completions")
      const run = spans.find((s) => s.name === "chat m")
      expect(server?.parent).toMatchObject({ _tag: "Some", value: { spanId: CLIENT_SPAN } })
      expect(request?.kind).toBe("server")
      expect(request?.parent).toMatchObject({ _tag: "Some", value: { spanId: server?.spanId } })
      expect(run?.parent).toMatchObject({ _tag: "Some", value: { spanId: request?.spanId } })
      expect(request?.attributes.get("http.response.status_code")).toBe(200)
      expect([server, request, run].every((s) => s?.status._tag === "Ended")).toBe(true)
    }))

  it.live("no tracer installed: no span is made and the upstream gets no traceparent", () =>
    Effect.gen(function* () {
      const sent = upstream.requests.length
      // Effect's built-in tracer: what an app without one has; the edge makes nothing for it.
      const answer = yield* ask.pipe(Effect.provide(edge()))
      expect(answer.choices[0]?.message.content).toBe("ok")
      expect(upstream.requests[sent]?.headers["traceparent"]).toBeUndefined()
    }))
})

describe("over NATS, to a node that does not trace", () => {
  let nats: NatsServer
  let receiver: OtlpReceiver
  let upstream: FakeUpstream
  beforeAll(async () => {
    nats = await startNatsServer()
    receiver = await startOtlpReceiver()
    upstream = await startFakeUpstream({ kind: "sse", events: textStream(["ok"]) })
  })
  afterAll(async () => {
    await upstream?.close()
    await receiver?.close()
    await nats?.stop()
  })

  it.live("the run's submission carries the edge attempt's context: the node's upstream continues it as it came", () =>
    Effect.gen(function* () {
      const bus = { nats: { servers: [nats.url] as const } }
      const port = yield* Effect.promise(freePort)
      const config = yield* Edge.decodeConfig({
        bus,
        server: { host: "127.0.0.1", port },
        models: [],
        telemetry: { otlp: { endpoint: receiver.endpoint } }
      }).pipe(Effect.orDie)
      const url = `http://127.0.0.1:${port}`
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* Layer.build(layerNode({
            bus,
            node: { id: "plain-node" },
            models: [{ id: "remote", provider: { type: "openai", baseUrl: upstream.url } }]
          }))
          yield* Layer.build(NatsEdge.layerServer(config))
          // The node is served once the edge heard it announce itself.
          const answer = yield* post(url, { model: "remote", messages: [{ role: "user", content: "hi" }] }).pipe(
            Effect.filterOrFail((a) => a.status === 200),
            Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("10 seconds")))
          )
          expect(answer.text).toContain("ok")
        }).pipe(Effect.orDie)
      ).pipe(Effect.provide(captureLogs([])))
      const seen = parseTraceparent(String(upstream.requests.at(-1)?.headers["traceparent"]))
      const attempt = receiver.spans().find((s) => s.name === "iop.attempt" && s.traceId === seen?.traceId)
      expect(attempt?.attributes["iop.node"]).toBe("plain-node")
      expect(seen?.spanId).toBe(attempt?.spanId)
      expect(receiver.spans().filter((s) => s.name === "iop.node.run")).toEqual([])
    }))
})
