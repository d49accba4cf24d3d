import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as Arbitrary from "effect/Arbitrary"
import * as FastCheck from "effect/FastCheck"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { ModelConfig } from "../../../src/config/EdgeConfig.js"
import * as RunEvent from "../../../src/protocol/RunEvent.js"
import { NodeId, RunId } from "../../../src/protocol/RunEvent.js"
import { decodeRunEvents, encodeRunEvents } from "../../../src/node/nats/eventsWire.js"
import * as P from "../../../src/node/nats/protocol.js"
import { modelOptions } from "../../../src/protocol/ModelOptions.js"
import { request } from "./harness.js"

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
      v: P.PROTOCOL_VERSION,
      nodeId: NodeId.make("gpu-1"),
      instanceId: "i1",
      models: [modelOptions({ id: "echo" }), modelOptions({ id: "qwen", output: { strict: true }, reasoning: { implicitOpen: true } })],
      maxConcurrentRuns: 8,
      inFlight: 3,
      draining: false
    }
    expect(roundTrip(P.encode.announce, P.decode.announce, announce)).toEqual({ _tag: "Ok", value: announce })
    const unlimited = { ...announce, maxConcurrentRuns: Number.POSITIVE_INFINITY }
    expect(roundTrip(P.encode.announce, P.decode.announce, unlimited)).toEqual({ _tag: "Ok", value: unlimited })

    const start: P.RunStart = {
      v: P.PROTOCOL_VERSION,
      runId,
      edgeId: "e1",
      request: { ...request("hi"), tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }] },
      eventsSubject: "iop.edge.e1.events.run_abc",
      window: 256 * 1024
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
    const messages: ReadonlyArray<P.RunEventsMsg> = [
      { v: P.PROTOCOL_VERSION, runId, seq: 0, accepted: true, events: [] },
      { v: P.PROTOCOL_VERSION, runId, seq: 1, events },
      { v: P.PROTOCOL_VERSION, runId, seq: 2, events: [] },
      { v: P.PROTOCOL_VERSION, runId, seq: 3, accepted: true, events: events.slice(0, 1) },
      { v: P.PROTOCOL_VERSION, runId, seq: 4, end: true, events: events.slice(0, 1) },
      { v: P.PROTOCOL_VERSION, runId, seq: 5, accepted: false, end: false, events: [] },
      { v: P.PROTOCOL_VERSION, runId, seq: 6, progress: true, events: [] }
    ]
    for (const msg of messages) expect(decodeRunEvents(encodeRunEvents(msg))).toEqual({ _tag: "Ok", value: msg })
    const credit: P.RunCredit = { v: P.PROTOCOL_VERSION, runId, granted: 3 * 256 * 1024 }
    expect(roundTrip(P.encode.runCredit, P.decode.runCredit, credit)).toEqual({ _tag: "Ok", value: credit })
    const replies: ReadonlyArray<P.RunReply> = [
      { _tag: "RunAccepted", v: P.PROTOCOL_VERSION },
      { _tag: "RunRefused", v: P.PROTOCOL_VERSION, reason: "at capacity" }
    ]
    for (const r of replies) expect(roundTrip(P.encode.runReply, P.decode.runReply, r)).toEqual({ _tag: "Ok", value: r })
    const cancel: P.RunCancel = { v: P.PROTOCOL_VERSION, runId, reason: "client gone" }
    expect(roundTrip(P.encode.runCancel, P.decode.runCancel, cancel)).toEqual({ _tag: "Ok", value: cancel })
    const beat: P.EdgeHeartbeat = { v: P.PROTOCOL_VERSION, edgeId: "e1" }
    expect(roundTrip(P.encode.edgeHeartbeat, P.decode.edgeHeartbeat, beat)).toEqual({ _tag: "Ok", value: beat })
    const leave: P.NodeLeave = { v: P.PROTOCOL_VERSION, nodeId: NodeId.make("gpu-1"), instanceId: "i1" }
    expect(roundTrip(P.encode.leave, P.decode.leave, leave)).toEqual({ _tag: "Ok", value: leave })
  })

  it("the hot-path run-events codec agrees with the RunEventsMsg schema: valid messages round-trip, broken ones are refused by both", () => {
    const decodeSchema = Schema.decodeUnknownEither(P.RunEventsMsg)
    FastCheck.assert(
      FastCheck.property(Arbitrary.make(P.RunEventsMsg), (msg) => {
        // What the wire carries is JSON (-0 is 0, NaN is null): both decoders read the same bytes alike.
        const data = encodeRunEvents(msg)
        const bySchema = decodeSchema(JSON.parse(new TextDecoder().decode(data)))
        const fast = decodeRunEvents(data)
        if (Either.isRight(bySchema)) expect(fast).toEqual({ _tag: "Ok", value: bySchema.right })
        else expect(fast._tag).toBe("Invalid")
      }),
      { numRuns: 300 }
    )
    // Messages with one field broken: whatever the schema refuses, the fast decoder refuses.
    const breakings: ReadonlyArray<(m: Record<string, unknown>) => unknown> = [
      (m) => ({ ...m, seq: -1 }),
      (m) => ({ ...m, seq: 1.5 }),
      (m) => ({ ...m, runId: 7 }),
      (m) => ({ ...m, events: "x" }),
      (m) => ({ ...m, events: [{ _tag: "Delta" }] }),
      (m) => ({ ...m, events: [{ _tag: "Complete", finishReason: "stop", toolCalls: [{ name: 1, arguments: "" }], metadata: {} }] }),
      (m) => ({ ...m, events: [{ _tag: "Complete", finishReason: "stop", toolCalls: [], metadata: { k: 1 } }] }),
      (m) => ({ ...m, events: [{ _tag: "Complete", finishReason: "stop", toolCalls: [], metadata: {}, usage: { inputTokens: 1 } }] }),
      (m) => ({ ...m, events: [{ _tag: "Failed", message: "x", upstream: { status: "400", message: "m" } }] }),
      (m) => ({ ...m, events: [{ _tag: "Failed", message: "x", transport: "timeout" }] }),
      (m) => ({ ...m, events: [{ _tag: "Cancelled" }] }),
      (m) => ({ ...m, events: [null] }),
      (m) => ({ ...m, accepted: "yes" }),
      (m) => ({ ...m, accepted: 1 }),
      (m) => ({ ...m, end: null }),
      (m) => ({ ...m, end: "true" }),
      (m) => ({ ...m, progress: 1 }),
      (m) => ({ ...m, events: [{ _tag: "Delta", text: "x", logprobs: [{ token: "x", logprob: "low" }] }] }),
      (m) => ({ ...m, events: [{ _tag: "Delta", text: "x", logprobs: [{ token: "x", logprob: 0, topLogprobs: [{}] }] }] })
    ]
    FastCheck.assert(
      FastCheck.property(Arbitrary.make(P.RunEventsMsg), FastCheck.nat(breakings.length - 1), (msg, i) => {
        const broken = breakings[i]?.({ ...msg })
        expect(Either.isLeft(decodeSchema(broken))).toBe(true)
        expect(decodeRunEvents(bytes(broken))._tag).toBe("Invalid")
      }),
      { numRuns: 300 }
    )
  })

  it("a __proto__ metadata key is dropped by the fast decoder as by the schema (a counterexample fast-check found)", () => {
    const raw = `{"v":${P.PROTOCOL_VERSION},"runId":"r","seq":0,"events":[{"_tag":"Complete","finishReason":"stop",` +
      `"toolCalls":[],"metadata":{"__proto__":"x","a":"b"}}]}`
    const bySchema = Schema.decodeUnknownEither(P.RunEventsMsg)(JSON.parse(raw))
    const fast = decodeRunEvents(new TextEncoder().encode(raw))
    expect(Either.isRight(bySchema)).toBe(true)
    if (Either.isRight(bySchema)) expect(fast).toEqual({ _tag: "Ok", value: bySchema.right })
    const event = fast._tag === "Ok" ? fast.value.events[0] : undefined
    expect(event?._tag === "Complete" ? Object.keys(event.metadata) : []).toEqual(["a"])
    expect(event?._tag === "Complete" ? Object.getPrototypeOf(event.metadata) : undefined).toBe(Object.prototype)
  })

  it("another protocol version is rejected whole, not half-read", () => {
    const msg = { runId: "r", seq: 0, events: [{ _tag: "Delta", text: "x" }] }
    expect(P.PROTOCOL_VERSION).toBe(4)
    expect(decodeRunEvents(bytes({ ...msg, v: 5 }))).toEqual({ _tag: "UnsupportedVersion", version: 5 })
    expect(decodeRunEvents(bytes(msg))).toEqual({ _tag: "UnsupportedVersion", version: undefined })
    expect(decodeRunEvents(bytes({ ...msg, v: "3" }))._tag).toBe("UnsupportedVersion")
    expect(decodeRunEvents(bytes({ ...msg, v: 3 }))._tag).toBe("UnsupportedVersion")
    expect(decodeRunEvents(bytes({ ...msg, v: 4 }))._tag).toBe("Ok")
    // A version 2 node's message (no credit: it would flood a stalled edge) is refused as such.
    const v2 = decodeRunEvents(bytes({ ...msg, v: 2 }))
    expect(v2).toEqual({ _tag: "UnsupportedVersion", version: 2 })
    expect(v2._tag !== "Ok" && P.describeRejection(v2)).toBe("unsupported protocol version 2")
    // A version 1 node's one-event message, and a version 2 edge's RunStart (no window), are refused as such.
    const v1 = decodeRunEvents(bytes({ v: 1, runId: "r", seq: 0, event: { _tag: "Delta", text: "x" } }))
    expect(v1).toEqual({ _tag: "UnsupportedVersion", version: 1 })
    const start = P.decode.runStart(bytes({ v: 2, runId: "r", edgeId: "e", request: request("hi"), eventsSubject: "s" }))
    expect(start._tag !== "Ok" && P.describeRejection(start)).toBe("unsupported protocol version 2")
    const credit = P.decode.runCredit(bytes({ v: 2, runId: "r", granted: 1 }))
    expect(credit._tag !== "Ok" && P.describeRejection(credit)).toBe("unsupported protocol version 2")
  })

  it("a RunStart needs a positive window; a RunCredit a cumulative byte count", () => {
    const v = P.PROTOCOL_VERSION
    const start = { v, runId: "r", edgeId: "e", request: request("hi"), eventsSubject: "s" }
    expect(P.decode.runStart(bytes(start))).toMatchObject({ _tag: "Invalid", message: expect.stringMatching(/window/) })
    for (const window of [0, -1, 1.5, "1"]) expect(P.decode.runStart(bytes({ ...start, window }))._tag).toBe("Invalid")
    expect(P.decode.runStart(bytes({ ...start, window: 1 }))._tag).toBe("Ok")
    for (const granted of [-1, 0.5, "9", null]) expect(P.decode.runCredit(bytes({ v, runId: "r", granted }))._tag).toBe("Invalid")
    expect(P.decode.runCredit(bytes({ v, runId: "r", granted: 0 }))._tag).toBe("Ok")
  })

  it("a message failing its schema is Invalid and names the field", () => {
    const v = P.PROTOCOL_VERSION
    const bad = decodeRunEvents(bytes({ v, runId: "r", seq: -1, events: [{ _tag: "Delta", text: "x" }] }))
    expect(bad._tag).toBe("Invalid")
    expect(bad._tag === "Invalid" && bad.message).toMatch(/^seq/)
    const badEvent = decodeRunEvents(bytes({ v, runId: "r", seq: 0, events: [{ _tag: "Delta", text: "x" }, { _tag: "Nope" }] }))
    expect(badEvent._tag).toBe("Invalid")
    expect(badEvent._tag === "Invalid" && badEvent.message).toMatch(/^events\[1\]/)
    expect(decodeRunEvents(bytes({ v, runId: "r", seq: 0, event: { _tag: "Delta", text: "x" } }))._tag).toBe("Invalid")
    expect(decodeRunEvents(new TextEncoder().encode("{not json"))._tag).toBe("Invalid")
    expect(decodeRunEvents(new Uint8Array([0xff, 0xfe]))._tag).toBe("Invalid")
  })

  it("announced models carry their options only: no provider, no upstream, no secret", () => {
    const announce = P.encode.announce({
      v: P.PROTOCOL_VERSION,
      nodeId: NodeId.make("n"),
      instanceId: "i",
      // A whole model config, as a node holds it: only its options are sent.
      models: [upstream],
      maxConcurrentRuns: 1,
      inFlight: 0,
      draining: false
    })
    const text = new TextDecoder().decode(Either.getOrThrow(announce))
    expect(text).not.toContain("sk-secret")
    expect(text).not.toContain("Bearer")
    expect(text).not.toContain("gpu:8000")
    expect(text).not.toContain("provider")
    expect(text).toContain('"qwen"')
    const p = upstream.provider
    expect(p.type === "openai" && p.apiKey !== undefined && Redacted.value(p.apiKey)).toBe("sk-secret")
  })

  it("subjects live under the prefix; ids must be subject tokens", () => {
    const s = P.subjects("iop")
    expect(s.run("gpu-1")).toBe("iop.node.gpu-1.run")
    expect(s.cancel("gpu-1")).toBe("iop.node.gpu-1.cancel")
    expect(s.credit("gpu-1")).toBe("iop.node.gpu-1.credit")
    // The node's one inbox subscription hears its RunStarts, RunCancels and RunCredits, in order.
    expect(s.nodeInbox("gpu-1")).toBe("iop.node.gpu-1.*")
    expect(s.events("e1", "run_x", "gpu-1")).toBe("iop.edge.e1.events.run_x.gpu-1")
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

describe("fitting a batch into messages", () => {
  const utf8 = (s: string) => Buffer.byteLength(s, "utf8")
  const envelope = (events: ReadonlyArray<RunEvent.RunEvent>) =>
    encodeRunEvents({ v: P.PROTOCOL_VERSION, runId, seq: 123_456_789, events })
  // Characters whose JSON costs differ: plain, escaped, control, 2- and 3-byte UTF-8, a pair, lone halves.
  const units = ["a", " ", "\"", "\\", "\n", "\u0001", "\u007f", "é", "€", "\u2028", "😀", "\ud800", "\udc00"]
  const text = FastCheck.array(FastCheck.constantFrom(...units), { maxLength: 400 }).map((cs) => cs.join(""))

  it.prop("splitText: the pieces join to the text, fit, and never cut a surrogate pair", [text, FastCheck.integer({ min: 1, max: 64 })], ([s, max]) => {
    const pieces = P.splitText(s, max)
    expect(pieces.join("")).toBe(s)
    let at = 0
    for (const piece of pieces) {
      const body = utf8(JSON.stringify(piece)) - 2
      // A piece is over only when it is one character that alone is over.
      if (body > max) expect([...piece]).toHaveLength(1)
      at += piece.length
      const before = s.charCodeAt(at - 1)
      const after = s.charCodeAt(at)
      const cutsPair = before >= 0xd800 && before <= 0xdbff && after >= 0xdc00 && after <= 0xdfff
      expect(at < s.length && cutsPair).toBe(false)
    }
    if (s.length > 0) for (const piece of pieces) expect(piece.length).toBeGreaterThan(0)
  })

  const event = FastCheck.oneof(
    text.map(RunEvent.delta),
    text.map(RunEvent.reasoningDelta),
    text.map(RunEvent.failed),
    FastCheck.constant(RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} }))
  )

  it.prop("fitBatch: every message fits, and the text arrives whole and in order", [FastCheck.array(event, { maxLength: 12 }), FastCheck.integer({ min: 600, max: 4000 })], ([events, maxPayload]) => {
    const messages = P.fitBatch(runId, events, maxPayload)
    for (const m of messages) expect(envelope(m).length).toBeLessThanOrEqual(maxPayload)
    const out = messages.flat()
    const same = (a: ReadonlyArray<RunEvent.RunEvent>, b: ReadonlyArray<RunEvent.RunEvent>, tag: "Delta" | "ReasoningDelta") =>
      expect(a.map((e) => (e._tag === tag ? e.text : "")).join("")).toBe(b.map((e) => (e._tag === tag ? e.text : "")).join(""))
    same(out, events, "Delta")
    same(out, events, "ReasoningDelta")
    // Text split into several events of its kind: the kinds, runs collapsed, are the same.
    const kinds = (es: ReadonlyArray<RunEvent.RunEvent>) =>
      es.map((e) => e._tag).filter((t, i, all) => i === 0 || t !== all[i - 1] || t === "Failed" || t === "Complete")
    expect(kinds(out)).toEqual(kinds(events))
    // A batch that fits is one message, as it came.
    if (utf8(JSON.stringify(events)) - 2 <= P.eventRoom(runId, maxPayload)) expect(messages).toEqual(events.length === 0 ? [] : [events])
  })

  it("a Complete too big for one message becomes a Failed that says why; a long error message is shortened", () => {
    const huge = RunEvent.complete({
      finishReason: "tool_calls",
      toolCalls: [{ id: "c1", name: "write", arguments: JSON.stringify({ content: "x".repeat(5000) }) }],
      metadata: {}
    })
    const [first, ...rest] = P.fitBatch(runId, [RunEvent.delta("hi"), huge], 2048)
    expect(rest).toEqual([])
    expect(first?.[0]).toEqual(RunEvent.delta("hi"))
    const failed = first?.[1]
    expect(failed?._tag).toBe("Failed")
    expect(failed?._tag === "Failed" && failed.message).toMatch(/^the run's result \(\d+ bytes, tool-call arguments included\) is larger than the message bus carries in one message \(NATS max_payload 2048 bytes\)$/)
    const [[long] = []] = P.fitBatch(runId, [RunEvent.failed("e".repeat(10_000))], 2048)
    expect(long?._tag === "Failed" && long.message).toMatch(/^e+ \(truncated\)$/)
    expect(envelope([long ?? RunEvent.failed("")]).length).toBeLessThanOrEqual(2048)
  })

  describe("logprobs", () => {
    const entries = (n: number, text: string): ReadonlyArray<RunEvent.TokenLogprob> =>
      Array.from({ length: n }, (_, i) => ({
        token: text.slice(i * 4, i * 4 + 4),
        logprob: -i / 7,
        bytes: [1, 2, 3, 4],
        topLogprobs: [{ token: "alt", logprob: -9 }]
      }))
    const textOf = (es: ReadonlyArray<RunEvent.RunEvent>) => es.map((e) => (e._tag === "Delta" ? e.text : "")).join("")
    const entriesOf = (es: ReadonlyArray<RunEvent.RunEvent>) => es.flatMap((e) => (e._tag === "Delta" ? e.logprobs ?? [] : []))

    it("a Delta's entries cross the bus; a message of a node that sends none still decodes", () => {
      const msg: P.RunEventsMsg = {
        v: P.PROTOCOL_VERSION,
        runId,
        seq: 0,
        events: [RunEvent.deltaWithLogprobs("Hi", [{ token: "Hi", logprob: -0.1, bytes: [72, 105], chars: 2 }]), RunEvent.delta("!")]
      }
      expect(decodeRunEvents(encodeRunEvents(msg))).toEqual({ _tag: "Ok", value: msg })
      const old = { v: P.PROTOCOL_VERSION, runId, seq: 1, events: [{ _tag: "Delta", text: "x" }] }
      expect(decodeRunEvents(bytes(old))).toEqual({ _tag: "Ok", value: old })
      const broken = { ...old, events: [{ _tag: "Delta", text: "x", logprobs: [{ token: "x" }] }] }
      expect(decodeRunEvents(bytes(broken))._tag).toBe("Invalid")
    })

    it("an oversize Delta: its entries go ahead of its text in messages that fit, whole and in order", () => {
      const text = "abcd".repeat(400)
      const delta = RunEvent.deltaWithLogprobs(text, entries(400, text))
      const messages = P.fitBatch(runId, [delta], 2048)
      expect(messages.length).toBeGreaterThan(1)
      for (const m of messages) expect(envelope(m).length).toBeLessThanOrEqual(2048)
      const out = messages.flat()
      expect(textOf(out)).toBe(text)
      expect(entriesOf(out)).toEqual(entriesOf([delta]))
      const firstText = out.findIndex((e) => e._tag === "Delta" && e.text !== "")
      expect(out.slice(firstText).every((e) => e._tag === "Delta" && e.logprobs === undefined)).toBe(true)
    })

    it("an entry too big for a message of its own loses its alternatives, then its token, never its place", () => {
      const big: RunEvent.TokenLogprob = { token: "x".repeat(300), logprob: -1, topLogprobs: [{ token: "y".repeat(300), logprob: -2 }] }
      // Room for events at 440 bytes: 95 (the envelope with its `accepted` and `end` flags, and the headroom, kept).
      const out = P.fitBatch(runId, [RunEvent.deltaWithLogprobs("x".repeat(300), [big])], 440).flat()
      expect(textOf(out)).toBe("x".repeat(300))
      expect(entriesOf(out)).toEqual([{ token: "", logprob: -1, chars: 300 }])
      const small: RunEvent.TokenLogprob = { ...big, token: "x" }
      const kept = P.fitBatch(runId, [RunEvent.deltaWithLogprobs("x".repeat(300), [small])], 440).flat()
      expect(entriesOf(kept)).toEqual([{ token: "x", logprob: -1 }])
    })
  })
})
