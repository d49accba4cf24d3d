import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Exit from "effect/Exit"
import * as TestClock from "effect/TestClock"
import { ModelConfig } from "../../src/config/EdgeConfig.js"
import * as Node from "../../src/node/Node.js"
import { CONSTRAINT_KEY, NodeId, RunId } from "../../src/protocol/RunEvent.js"
import type { SubmitRunRequest } from "../../src/protocol/SubmitRunRequest.js"
import { RecordingSink } from "../../src/testing.js"
import { type FakeUpstreamOptions, startFakeUpstream, textStream } from "../support/fakeUpstream.js"

const echo = Schema.decodeUnknownSync(ModelConfig)({ id: "echo", provider: { type: "echo", tokenDelayMs: 10 } })
const make = Node.servedFromConfig([echo]).pipe(
  Effect.map((models) => Node.make({ id: NodeId.make("n"), models, maxConcurrentRuns: 4 })),
  Effect.provide(NodeHttpClient.dispatcherLayer)
)
const request = (model: string, text: string): SubmitRunRequest => ({
  model,
  messages: [{ role: "user", content: text }],
  tools: [],
  sampling: {},
  metadata: {}
})

describe("Node", () => {
  it.effect("a node serves one upstream per model: a model with several replicas is refused, naming the field", () =>
    Effect.gen(function* () {
      const replicated = Schema.decodeUnknownSync(ModelConfig)({
        id: "m",
        provider: { type: "openai", baseUrls: ["http://a:1/v1", "http://b:1/v1"], constraints: "none" }
      })
      const exit = yield* Effect.exit(Node.servedFromConfig([echo, replicated]).pipe(Effect.provide(NodeHttpClient.dispatcherLayer)))
      expect(Exit.isFailure(exit) && String(exit.cause)).toMatch(/models\[1\]\.provider\.baseUrls: a node serves one upstream per model/)
    })
  )

  it.scoped("executes a run with the model's provider, into the run's sink", () =>
    Effect.gen(function* () {
      const node = yield* make
      const rec = yield* RecordingSink.make
      yield* node.execute(RunId.make("r1"), request("echo", "hi there"), rec.sink)
      const fiber = yield* Effect.fork(rec.ended)
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(fiber)
      expect((yield* rec.events).map((e) => (e._tag === "Delta" ? e.text : e._tag))).toEqual(["hi", " the", "re", "Complete"])
    })
  )

  it.scoped("an unknown model is a Failed event, not a crash", () =>
    Effect.gen(function* () {
      const node = yield* make
      const rec = yield* RecordingSink.make
      yield* node.execute(RunId.make("r1"), request("nope", "x"), rec.sink)
      expect(yield* rec.events).toEqual([{ _tag: "Failed", message: 'node n does not serve model "nope"' }])
    })
  )

  it.scoped("closing the run's scope stops it: no event after, and it no longer counts as active", () =>
    Effect.gen(function* () {
      const node = yield* make
      const rec = yield* RecordingSink.make
      const scope = yield* Scope.make()
      yield* node.execute(RunId.make("r1"), request("echo", "a long message to echo back slowly"), rec.sink).pipe(
        Scope.extend(scope)
      )
      yield* TestClock.adjust("25 millis")
      expect(yield* node.activeRuns).toBe(1)
      yield* Scope.close(scope, Exit.void)
      const seen = (yield* rec.events).length
      yield* TestClock.adjust("1 second")
      expect((yield* rec.events).length).toBe(seen)
      expect((yield* rec.events).some((e) => e._tag === "Complete")).toBe(false)
      expect(yield* node.activeRuns).toBe(0)
    })
  )
})

describe("Node: what it asks a model's upstream when it starts", () => {
  const fakeUpstream = (options: FakeUpstreamOptions) =>
    Effect.acquireRelease(
      Effect.promise(() => startFakeUpstream({ kind: "sse", events: textStream(["ok"]) }, options)),
      (fake) => Effect.promise(() => fake.close())
    )
  const openai = (url: string, fields: Record<string, unknown> = {}) =>
    Schema.decodeUnknownSync(ModelConfig)({ id: "m", provider: { type: "openai", baseUrl: url }, ...fields })
  const required: SubmitRunRequest = {
    ...request("m", "book"),
    tools: [{ type: "function", function: { name: "book", parameters: { type: "object" } } }],
    toolChoice: "required"
  }
  const run = (node: Node.Node, submit: SubmitRunRequest) =>
    Effect.gen(function* () {
      const rec = yield* RecordingSink.make
      yield* node.execute(RunId.make("r"), submit, rec.sink)
      yield* rec.ended
      const last = (yield* rec.events).at(-1)
      return last?._tag === "Complete" ? last.metadata[CONSTRAINT_KEY] : undefined
    })
  const serve = (model: typeof ModelConfig.Type) =>
    Effect.map(Node.servedFromConfig([model]), (models) => Node.make({ id: NodeId.make("n"), models, maxConcurrentRuns: 4 }))

  it.scoped("a plain config (constraints auto by default) asks nothing at start; its first strict request does", () =>
    Effect.gen(function* () {
      const fake = yield* fakeUpstream({ routes: { "/props": { body: { chat_template: "x", default_generation_settings: {} } } } })
      const model = openai(fake.url)
      expect(model.provider.type === "openai" ? model.provider.constraints : undefined).toBe("auto")
      const node = yield* serve(model)
      expect(fake.others).toEqual([])
      expect(yield* run(node, required)).toBe("grammar")
      expect(fake.others.map((r) => r.path)).toEqual(["/props"])
    }).pipe(Effect.provide(NodeHttpClient.dispatcherLayer)))

  it.scoped("toolFormats auto reads /props once: the provider is told what it said, and does not ask again", () =>
    Effect.gen(function* () {
      const llama = yield* fakeUpstream({ routes: { "/props": { body: { chat_template: "<tool_call>", default_generation_settings: {} } } } })
      expect(yield* run(yield* serve(openai(llama.url, { toolFormats: "auto" })), required)).toBe("grammar")
      expect(llama.others.map((r) => r.path)).toEqual(["/props"])
      const vllm = yield* fakeUpstream({ routes: { "/version": { body: { version: "0.11.0" } } } })
      expect(yield* run(yield* serve(openai(vllm.url, { toolFormats: "auto" })), required)).toBe("grammar")
      expect(vllm.others.map((r) => r.path)).toEqual(["/props", "/version"])
    }).pipe(Effect.provide(NodeHttpClient.dispatcherLayer)))
})
