import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { ModelConfig } from "../../../src/config/EdgeConfig.js"
import * as Node from "../../../src/node/Node.js"
import * as NodeRegistry from "../../../src/run/NodeRegistry.js"
import { NodeId } from "../../../src/run/RunEvent.js"
import * as RunService from "../../../src/run/RunService.js"
import type { SubmitRunRequest } from "../../../src/run/SubmitRunRequest.js"
import * as EdgeTransport from "../../../src/run/transport/nats/EdgeTransport.js"
import * as NatsBus from "../../../src/run/transport/nats/NatsBus.js"
import * as NodeServer from "../../../src/run/transport/nats/NodeServer.js"

export const NODE_TIMEOUT_MS = 600

let prefixes = 0
/** A bus config with its own subject prefix, so tests sharing one server do not hear each other. */
export const busConfig = (url: string): NatsBus.BusConfig =>
  Schema.decodeUnknownSync(NatsBus.BusConfig)({
    nats: { servers: [url], subjectPrefix: `t${process.pid}.p${++prefixes}` },
    nodeTimeoutMs: NODE_TIMEOUT_MS
  })

const tuning: NatsBus.ClientTuning = { reconnectTimeWaitMs: 100 }

export const echoModel = (tokenDelayMs: number): ModelConfig =>
  Schema.decodeUnknownSync(ModelConfig)({ id: "echo", provider: { type: "echo", tokenDelayMs } })

export const request = (text: string, model = "echo"): SubmitRunRequest => ({
  model,
  messages: [{ role: "user", content: text }],
  tools: [],
  sampling: {},
  metadata: {}
})

export const LONG_TEXT = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ")

/** One edge: its own bus connection, registry, run service and discovery (as a separate process would have). */
export const makeEdge = (bus: NatsBus.BusConfig, edgeId: string) =>
  Effect.gen(function* () {
    const conn = yield* NatsBus.make(bus, { ...tuning, name: edgeId })
    const registry = yield* NodeRegistry.make
    const runs = yield* RunService.make.pipe(Effect.provideService(NodeRegistry.NodeRegistry, registry))
    const discovery = yield* EdgeTransport.discover({ bus, edgeId }).pipe(
      Effect.provideService(NatsBus.NatsConnection, conn),
      Effect.provideService(NodeRegistry.NodeRegistry, registry)
    )
    return { conn, registry, runs, discovery }
  })

/** One node serving an echo model, in its own scope: close `scope` to shut it down gracefully. */
export const makeNode = (
  bus: NatsBus.BusConfig,
  id: string,
  options: { readonly maxConcurrentRuns?: number; readonly tokenDelayMs?: number; readonly drainTimeoutMs?: number } = {}
) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
    const model = echoModel(options.tokenDelayMs ?? 0)
    const nodeId = NodeId.make(id)
    const conn = yield* NatsBus.make(bus, { ...tuning, name: id }).pipe(Scope.extend(scope))
    const node = yield* Node.make({ id: nodeId, models: [model], maxConcurrentRuns: options.maxConcurrentRuns ?? 4 }).pipe(
      Effect.provide(NodeHttpClient.layerUndici)
    )
    yield* NodeServer.serve(node, {
      bus,
      nodeId,
      models: [model],
      ...(options.drainTimeoutMs !== undefined ? { drainTimeoutMs: options.drainTimeoutMs } : {})
    }).pipe(Effect.provideService(NatsBus.NatsConnection, conn), Scope.extend(scope))
    return { node, conn, scope }
  })

/** Polls `check` until `until` holds (fails the test after `ms`). */
export const waitFor = <A>(check: Effect.Effect<A>, until: (a: A) => boolean, ms = 5000) =>
  check.pipe(
    Effect.repeat({ schedule: Schedule.spaced(Duration.millis(20)), until }),
    Effect.timeoutFail({ duration: Duration.millis(ms), onTimeout: () => new Error(`condition not met within ${ms} ms`) }),
    Effect.orDie
  )

export const nodesOf = (edge: { readonly registry: NodeRegistry.NodeRegistry.Service }) =>
  edge.registry.nodes.pipe(Effect.map((ns) => ns.map((n) => n.id).sort()))
