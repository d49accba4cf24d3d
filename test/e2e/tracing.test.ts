import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseTraceparent } from "../../src/common/traceparent.js"
import { eventually, postJson } from "../support/e2e.js"
import { startEdge } from "../support/edgeProcess.js"
import { completionTokens, FAKE_MODEL, type FakeUpstream, startFakeUpstream, textStream } from "../support/fakeUpstream.js"
import { type NatsServer, startNatsServer } from "../support/natsServer.js"
import { startNode } from "../support/nodeProcess.js"
import { type OtlpReceiver, startOtlpReceiver } from "../support/otlpReceiver.js"

/**
 * `iop edge` and `iop node` as processes over a real nats-server, both exporting to one OTLP receiver
 * (`telemetry.otlp.endpoint`): the request's trace crosses the bus in the run's submission, the node continues it
 * in a span of its own, its upstream continues that; each process exports what is left when it stops.
 */

const CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
const CLIENT_SPAN = "b7ad6b7169203331"

describe("a trace across the bus (iop edge → NATS → iop node → upstream)", () => {
  let nats: NatsServer
  let receiver: OtlpReceiver
  let upstream: FakeUpstream
  beforeAll(async () => {
    nats = await startNatsServer()
    receiver = await startOtlpReceiver()
    upstream = await startFakeUpstream({ kind: "sse", events: textStream(["over", " the bus"], { usage: completionTokens(5, 3) }) })
  })
  afterAll(async () => {
    await upstream?.close()
    await receiver?.close()
    await nats?.stop()
  })

  it("the node's span is the edge attempt's child, the upstream the node's; both processes flush as they stop", async () => {
    const bus = { nats: { servers: [nats.url] } }
    const telemetry = { otlp: { endpoint: receiver.endpoint } }
    const node = await startNode({
      node: { id: "traced-node" },
      bus,
      telemetry,
      models: [{ id: "bus-model", provider: { type: "openai", baseUrl: upstream.url, model: FAKE_MODEL } }]
    })
    const edge = await startEdge({ config: { bus, models: [], telemetry } })
    await eventually(async () => {
      const response = await fetch(`${edge.baseURL}/models`)
      expect(JSON.stringify(await response.json())).toContain("bus-model")
    }, 50)

    const response = await postJson(
      `${edge.baseURL}/chat/completions`,
      { model: "bus-model", messages: [{ role: "user", content: "hi" }] },
      { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` }
    )
    expect(response.status).toBe(200)
    const answer = (await response.json()) as { choices: Array<{ message: { content: string } }> }
    expect(answer.choices[0]?.message.content).toBe("over the bus")
    // The spans go out every 5 s, and the rest when a process stops (SIGTERM).
    expect(await edge.stop()).toBe(0)
    expect(await node.stop()).toBe(0)

    const spans = receiver.spans().filter((s) => s.traceId === CLIENT_TRACE)
    const edgeSpans = spans.filter((s) => s.service === "iop-edge")
    const request = edgeSpans.find((s) => s.name === "POST /v1/chat/completions")
    const run = edgeSpans.find((s) => s.name === "chat bus-model")
    const attempt = edgeSpans.find((s) => s.name === "iop.attempt")
    expect(request?.parentSpanId).toBe(CLIENT_SPAN)
    expect(run?.parentSpanId).toBe(request?.spanId)
    expect(attempt?.parentSpanId).toBe(run?.spanId)
    expect(attempt?.attributes).toMatchObject({ "iop.node": "traced-node", "iop.outcome": "success", "gen_ai.usage.output_tokens": 3 })

    const nodeRun = spans.find((s) => s.service === "iop-node" && s.name === "iop.node.run")
    expect(nodeRun).toMatchObject({ kind: 2, parentSpanId: attempt?.spanId })
    expect(nodeRun?.attributes).toMatchObject({
      "iop.node": "traced-node",
      "iop.run_id": attempt?.attributes["iop.run_id"],
      "gen_ai.request.model": "bus-model"
    })
    const seen = parseTraceparent(String(upstream.requests.at(-1)?.headers["traceparent"]))
    expect(seen).toEqual({ traceId: CLIENT_TRACE, spanId: nodeRun?.spanId, sampled: true })
  })
})
