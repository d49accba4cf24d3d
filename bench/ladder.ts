/**
 * Where the edge's CPU per token goes, plane by plane: the same streamed
 * completion cut after the provider, the node, the run service, the chat
 * plane and the SSE rendering, each drained in this process against the fake
 * upstream (a child). The HTTP server's share is the full edge (bench table)
 * minus the last level. `node dist-bench/bench/ladder.js [bench|paced] [N] [ms]`;
 * `BENCH_PROFILE=1 npm run bench` runs it for the paced upstream.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Stream from "effect/Stream"
import { fileURLToPath } from "node:url"
import { dirname, resolve } from "node:path"
import { ChatCompletions } from "../src/chat/ChatCompletions.js"
import * as EdgeConfig from "../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../src/config/loadConfig.js"
import { EdgeLive } from "../src/Edge.js"
import { sseBody } from "../src/http/routes.js"
import { decodeBody, toChatRequest } from "../src/http/toChatRequest.js"
import { EmbeddedNode } from "../src/node/EmbeddedNode.js"
import { makeProvider } from "../src/node/Node.js"
import { newRunId, RunService } from "../src/run/RunService.js"
import { requestBody } from "./load.js"
import { killAll, listeningPort, spawnNode } from "./procs.js"

const TOKENS = 256

export interface Level {
  readonly level: string
  readonly tokensPerSec: number
  readonly cpuMicrosPerToken: number
}

export const measureLadder = async (options: {
  readonly model: "bench" | "paced"
  readonly concurrency: number
  readonly durationMs: number
  readonly paceMs: number
}): Promise<ReadonlyArray<Level>> => {
  const here = dirname(fileURLToPath(import.meta.url))
  const upstream = spawnNode("upstream", resolve(here, "upstream.js"), [String(TOKENS), String(options.paceMs)])
  const port = await listeningPort(upstream)
  const config = Either.getOrThrow(decodeConfigJson("ladder", {
    runs: { idleTimeoutMs: 600_000 },
    models: [{ id: options.model, provider: { type: "openai", baseUrl: `http://127.0.0.1:${port}/v1`, model: options.model } }]
  }))
  const model = config.models[0]
  if (model === undefined) throw new Error("no model")
  const runtime = ManagedRuntime.make(
    EdgeLive.pipe(
      Layer.provideMerge(NodeHttpClient.layerUndici),
      Layer.provide(EdgeConfig.layer(config)),
      Layer.provideMerge(Logger.minimumLogLevel(LogLevel.None))
    )
  )
  try {
    const request = await runtime.runPromise(
      Effect.flatMap(decodeBody(requestBody(options.model)), (wire) => toChatRequest(config, wire))
    )
    const provider = await runtime.runPromise(makeProvider(model))
    const node = await runtime.runPromise(EmbeddedNode)
    const runs = await runtime.runPromise(RunService)
    const chat = await runtime.runPromise(ChatCompletions)
    const drain = <A, E>(stream: Stream.Stream<A, E>) => Stream.runDrain(stream).pipe(Effect.orDie)
    const levels: ReadonlyArray<readonly [string, () => Effect.Effect<void>]> = [
      ["1 provider.run: undici, body stream, SSE decode, mapper", () => drain(provider.run(request.submit))],
      ["2 + node.execute: producer fiber, queue", () => drain(node.execute(newRunId(), request.submit))],
      [
        "3 + RunService.submit: interruptWhen(node gone), takeUntil",
        () => Effect.scoped(Effect.flatMap(runs.submit(request.submit), (handle) => drain(handle.events))).pipe(Effect.orDie)
      ],
      [
        "4 + ChatCompletions.stream: idle timeout, session, chunks",
        () => Effect.scoped(Effect.flatMap(chat.stream(request), drain)).pipe(Effect.orDie)
      ],
      [
        "5 + sseBody: SSE text, bytes",
        () => Effect.scoped(Effect.flatMap(chat.stream(request), (items) => drain(sseBody(items)))).pipe(Effect.orDie)
      ]
    ]
    const out: Array<Level> = []
    for (const [level, one] of levels) {
      const loop = async (ms: number) => {
        const end = performance.now() + ms
        let requests = 0
        const worker = Effect.gen(function* () {
          while (performance.now() < end) {
            yield* one()
            requests++
          }
        })
        await runtime.runPromise(Effect.all(Array.from({ length: options.concurrency }, () => worker), { concurrency: "unbounded" }))
        return requests
      }
      await loop(Math.min(1_000, options.durationMs))
      const cpu = process.cpuUsage()
      const started = performance.now()
      const tokens = (await loop(options.durationMs)) * TOKENS
      const used = process.cpuUsage(cpu)
      out.push({
        level,
        tokensPerSec: tokens / ((performance.now() - started) / 1000),
        cpuMicrosPerToken: (used.user + used.system) / tokens
      })
    }
    return out
  } finally {
    await runtime.dispose()
    await killAll()
  }
}

export const formatLadder = (levels: ReadonlyArray<Level>): string =>
  levels
    .map((l, i) => {
      const added = i === 0 ? "" : ` (+${(l.cpuMicrosPerToken - (levels[i - 1]?.cpuMicrosPerToken ?? 0)).toFixed(0)})`
      return `${l.level.padEnd(60)} ${l.tokensPerSec.toFixed(0).padStart(7)} tok/s ${l.cpuMicrosPerToken.toFixed(0).padStart(5)} µs CPU/token${added}`
    })
    .join("\n")

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const model = process.argv[2] === "bench" ? "bench" : "paced"
  measureLadder({
    model,
    concurrency: Number(process.argv[3] ?? "16"),
    durationMs: Number(process.argv[4] ?? "3000"),
    paceMs: 5
  }).then(
    (levels) => process.stdout.write(`${formatLadder(levels)}\n`),
    (error: unknown) => {
      process.stderr.write(`ladder failed: ${String(error)}\n`)
      process.exitCode = 1
    }
  )
}
