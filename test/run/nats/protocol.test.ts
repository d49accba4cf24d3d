import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { ModelConfig } from "../../../src/config/EdgeConfig.js"
import * as RunEvent from "../../../src/run/RunEvent.js"
import { NodeId, RunId } from "../../../src/run/RunEvent.js"
import * as P from "../../../src/run/transport/nats/protocol.js"
import { echoModel, request } from "./harness.js"

const bytes = (json: unknown) => new TextEncoder().encode(JSON.stringify(json))
const roundTrip = <A>(encode: (a: A) => Either.Either<Uint8Array, string>, decode: (b: Uint8Array) => P.Decoded<A>, a: A) =>
  decode(Either.getOrThrow(encode(a)))

const runId = RunId.make("run_abc")
const upstream = Schema.decodeUnknownSync(ModelConfig)({
  id: "qwen",
  provider: { type: "openai", baseUrl: "http://gpu:8000/v1", apiKey: "sk-secret", headers: { authorization: "Bearer x" } },
  output: { strict: true },
  reasoning: { implicitOpen: true }
})

describe("protocol", () => {
  it("every message survives encode/decode unchanged", () => {
    const announce: P.NodeAnnounce = {
      v: 1,
      nodeId: NodeId.make("gpu-1"),
      instanceId: "i1",
      models: [echoModel(5), P.publicModel(upstream)],
      maxConcurrentRuns: 8,
      inFlight: 3,
      draining: false
    }
    expect(roundTrip(P.encode.announce, P.decode.announce, announce)).toEqual({ _tag: "Ok", value: announce })
    const unlimited = { ...announce, maxConcurrentRuns: Number.POSITIVE_INFINITY }
    expect(roundTrip(P.encode.announce, P.decode.announce, unlimited)).toEqual({ _tag: "Ok", value: unlimited })

    const start: P.RunStart = {
      v: 1,
      runId,
      edgeId: "e1",
      request: { ...request("hi"), tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }] },
      eventsSubject: "iop.edge.e1.events.run_abc"
    }
    expect(roundTrip(P.encode.runStart, P.decode.runStart, start)).toEqual({ _tag: "Ok", value: start })

    const events: ReadonlyArray<RunEvent.RunEvent> = [
      RunEvent.delta("he"),
      RunEvent.reasoningDelta("think"),
      RunEvent.complete({
        finishReason: "tool_calls",
        toolCalls: [{ id: "c1", name: "f", arguments: "{}" }],
        usage: { inputTokens: 1, outputTokens: 2 },
        metadata: { k: "v" }
      }),
      RunEvent.failed("boom"),
      RunEvent.cancelled("bye")
    ]
    events.forEach((event, seq) => {
      const msg: P.RunEventMsg = { v: 1, runId, seq, event }
      expect(roundTrip(P.encode.runEvent, P.decode.runEvent, msg)).toEqual({ _tag: "Ok", value: msg })
    })
    const replies: ReadonlyArray<P.RunReply> = [{ _tag: "RunAccepted", v: 1 }, { _tag: "RunRefused", v: 1, reason: "at capacity" }]
    for (const r of replies) expect(roundTrip(P.encode.runReply, P.decode.runReply, r)).toEqual({ _tag: "Ok", value: r })
    const cancel: P.RunCancel = { v: 1, runId, reason: "client gone" }
    expect(roundTrip(P.encode.runCancel, P.decode.runCancel, cancel)).toEqual({ _tag: "Ok", value: cancel })
    const beat: P.EdgeHeartbeat = { v: 1, edgeId: "e1" }
    expect(roundTrip(P.encode.edgeHeartbeat, P.decode.edgeHeartbeat, beat)).toEqual({ _tag: "Ok", value: beat })
    const leave: P.NodeLeave = { v: 1, nodeId: NodeId.make("gpu-1"), instanceId: "i1" }
    expect(roundTrip(P.encode.leave, P.decode.leave, leave)).toEqual({ _tag: "Ok", value: leave })
  })

  it("another protocol version is rejected whole, not half-read", () => {
    const msg = { runId: "r", seq: 0, event: { _tag: "Delta", text: "x" } }
    expect(P.decode.runEvent(bytes({ ...msg, v: 2 }))).toEqual({ _tag: "UnsupportedVersion", version: 2 })
    expect(P.decode.runEvent(bytes(msg))).toEqual({ _tag: "UnsupportedVersion", version: undefined })
    expect(P.decode.runEvent(bytes({ ...msg, v: "1" }))._tag).toBe("UnsupportedVersion")
    expect(P.decode.runEvent(bytes({ ...msg, v: 1 }))._tag).toBe("Ok")
  })

  it("a message failing its schema is Invalid and names the field", () => {
    const bad = P.decode.runEvent(bytes({ v: 1, runId: "r", seq: -1, event: { _tag: "Delta", text: "x" } }))
    expect(bad._tag).toBe("Invalid")
    expect(bad._tag === "Invalid" && bad.message).toMatch(/^seq/)
    const badEvent = P.decode.runEvent(bytes({ v: 1, runId: "r", seq: 0, event: { _tag: "Nope" } }))
    expect(badEvent._tag).toBe("Invalid")
    expect(P.decode.runEvent(new TextEncoder().encode("{not json"))._tag).toBe("Invalid")
    expect(P.decode.runEvent(new Uint8Array([0xff, 0xfe]))._tag).toBe("Invalid")
  })

  it("announced models carry no upstream secrets", () => {
    const announce = P.encode.announce({
      v: 1,
      nodeId: NodeId.make("n"),
      instanceId: "i",
      models: [P.publicModel(upstream)],
      maxConcurrentRuns: 1,
      inFlight: 0,
      draining: false
    })
    const text = new TextDecoder().decode(Either.getOrThrow(announce))
    expect(text).not.toContain("sk-secret")
    expect(text).not.toContain("Bearer")
    expect(text).toContain("http://gpu:8000/v1")
    const p = upstream.provider
    expect(p.type === "openai" && p.apiKey !== undefined && Redacted.value(p.apiKey)).toBe("sk-secret")
  })

  it("subjects live under the prefix; ids must be subject tokens", () => {
    const s = P.subjects("iop")
    expect(s.run("gpu-1")).toBe("iop.node.gpu-1.run")
    expect(s.cancel("gpu-1")).toBe("iop.node.gpu-1.cancel")
    expect(s.events("e1", "run_x")).toBe("iop.edge.e1.events.run_x")
    expect([s.announce, s.leave, s.edgeHeartbeat]).toEqual(["iop.nodes.announce", "iop.nodes.leave", "iop.edges.heartbeat"])
    expect(P.isSubjectToken("gpu-1")).toBe(true)
    for (const bad of ["a.b", "a b", "*", ">", ""]) expect(P.isSubjectToken(bad)).toBe(false)
  })
})

describe("sequence check", () => {
  const run = (seqs: ReadonlyArray<number>) => {
    let state = P.initial()
    const results: Array<string> = []
    for (const seq of seqs) {
      const r = P.accept(state, seq)
      results.push(r._tag)
      if (r._tag !== "Ok") break
      state = r.state
    }
    return results
  }

  it("in order is accepted", () => expect(run([0, 1, 2, 3])).toEqual(["Ok", "Ok", "Ok", "Ok"]))
  it("a gap is reported", () => expect(run([0, 1, 3])).toEqual(["Ok", "Ok", "Gap"]))
  it("a first event that is not 0 is a gap", () => expect(run([1])).toEqual(["Gap"]))
  it("a duplicate is reported", () => expect(run([0, 1, 1])).toEqual(["Ok", "Ok", "Duplicate"]))
  it("an old event is a duplicate", () => expect(run([0, 1, 2, 0])).toEqual(["Ok", "Ok", "Ok", "Duplicate"]))
  it("the messages say what was expected", () => {
    expect(P.describeSeqError({ _tag: "Gap", expected: 2, got: 4 })).toBe("run stream lost events (expected event 2, got 4)")
  })

  it.prop("only the exact sequence 0..n-1 is accepted whole", [FastCheck.array(FastCheck.nat(6), { maxLength: 8 })], ([seqs]) => {
    const allOk = run(seqs).every((r) => r === "Ok") && run(seqs).length === seqs.length
    expect(allOk).toBe(seqs.every((s, i) => s === i))
  })
})
