import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type * as Undici from "@effect/platform-node/Undici"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { DEFAULT_TEXT_FORMATS, type TextFormat, type ToolMode } from "../../protocol/ModelOptions.js"
import type { RunSink } from "../../protocol/RunSink.js"
import type { SubmitRunRequest } from "../../protocol/SubmitRunRequest.js"
import type { Provider } from "../Provider.js"
import { makeGrammarCache } from "./grammarCache.js"
import { type KindDetector, makeKindDetector } from "./kindDetector.js"
import { probeKind } from "./kindProbe.js"
import { planOutput, type PlanContext, wantsConstraint } from "./outputConstraint.js"
import * as Mapper from "./toRunEvents.js"
import { configuredKind, LLAMA_CPP, NO_KIND, type UpstreamKind } from "./upstreamKind.js"
import { toUpstreamBody } from "./upstreamRequest.js"
import { type Target, UpstreamRun } from "./upstreamRun.js"
import { upstreamText } from "./upstreamWire.js"
import { onCloseSync } from "../../common/onClose.js"

/**
 * A provider for any OpenAI-compatible upstream (llama.cpp, vLLM, Ollama,
 * LM Studio, OpenAI): one streamed `POST {baseUrl}/chat/completions` per run,
 * sent with undici's `dispatch` and read by its handler: each read is
 * decoded, folded through the pure mapper and handed to the run's sink in one
 * `emit`; no fiber remains while the body flows. Every failure (HTTP status,
 * transport, broken stream, upstream error event) becomes the run's one
 * `Failed` event; the sink ends right after the terminal event. A failed read
 * aborts the request at once; a clean end drains the rest of the body, bounded,
 * for the connection's reuse. Closing the run's scope aborts the request and
 * closes the socket. (The run itself: `upstreamRun.ts`.)
 *
 * Upstream text in a `Failed` event is clipped (1 KiB) and scrubbed of the
 * edge's upstream key (and anything that looks like a bearer token or key);
 * a non-2xx answer's status, `code` and `Retry-After` go with it. A request
 * that got no answer says only "upstream unreachable": its cause (which names
 * the upstream's address) goes to the log.
 *
 * A request that must call a tool or is strict is constrained at the upstream
 * by its kind (`outputConstraint.ts`); under `constraints: "auto"` the kind is
 * asked for on the first such request (`kindDetector.ts`). Every `Complete`
 * says how its answer was constrained (`metadata.constraint`).
 */

export interface Options {
  /** The upstream's base URL, ending in `/v1` for most servers. */
  readonly baseUrl: string
  readonly upstreamModel: string
  readonly apiKey: Redacted.Redacted<string> | undefined
  readonly toolMode: ToolMode
  readonly headers?: Readonly<Record<string, string>>
  /** Fields added to every upstream request body; the request's own fields win. */
  readonly extraBody?: Readonly<Record<string, unknown>>
  /**
   * What the upstream can constrain: `llama.cpp`, `vllm`, `ollama`, `none`, or `auto` (the default: asked of the
   * upstream on the first request that needs a constraint).
   */
  readonly constraints?: "auto" | "llama.cpp" | "vllm" | "ollama" | "none"
  /** The model's text tool-call formats: a constraint is only sent in a shape they parse (default: all but one). */
  readonly toolFormats?: ReadonlyArray<TextFormat>
  /** The model is strict: its requests with tools are constrained even under `tool_choice: "auto"`. */
  readonly strict?: boolean
  /** What its node's read of `/props` found (`toolFormats: "auto"`): `auto` then does not ask it again. */
  readonly propsRead?: "llama.cpp" | "other"
}

export const make = (options: Options): Effect.Effect<Provider, never, NodeHttpClient.Dispatcher> =>
  Effect.map(NodeHttpClient.Dispatcher, (dispatcher): Provider => {
    const url = `${options.baseUrl.replace(/\/+$/, "")}/chat/completions`
    const parsed = URL.canParse(url) ? new URL(url) : undefined
    const target: Target | undefined = parsed === undefined ? undefined : {
      dispatcher,
      origin: parsed.origin,
      path: parsed.pathname + parsed.search,
      headers: requestHeaders(options, "text/event-stream"),
      wholeHeaders: requestHeaders(options, "application/json")
    }
    const extraBody = options.extraBody ?? {}
    const strict = options.strict ?? false
    const context: Omit<PlanContext, "kind"> = {
      toolMode: options.toolMode,
      toolFormats: options.toolFormats ?? DEFAULT_TEXT_FORMATS,
      strictModel: strict,
      extraBody,
      grammarOf: makeGrammarCache()
    }
    const secret = options.apiKey === undefined ? undefined : Redacted.value(options.apiKey)
    const fixed = configuredKind(options.constraints ?? "auto")
    const detector = fixed !== undefined ? undefined : autoKind(options, dispatcher)

    const send = (request: SubmitRunRequest, sink: RunSink, kind: UpstreamKind): Effect.Effect<void, never, Scope.Scope> =>
      Effect.flatMap(Effect.runtime<never>(), (runtime) => {
        // A failure's detail that must not reach the client, logged from the callback that heard it.
        const log = (message: string, detail: string): void => {
          Runtime.runFork(runtime)(
            Effect.logWarning(message).pipe(Effect.annotateLogs({ error: upstreamText(detail, secret) }))
          )
        }
        const plan = planOutput(request, { ...context, kind })
        const initial = Mapper.initial({ toolMode: plan.toolMode, upstreamModel: options.upstreamModel, constraint: plan.constraint })
        const heard = detector === undefined ? undefined : heardBy(detector, runtime, options.upstreamModel)
        const run = new UpstreamRun(sink, initial, secret, log, heard)
        if (target === undefined) {
          return Effect.sync(() => {
            log("upstream request failed", `invalid base URL ${url}`)
            run.failBeforeResponse("upstream request failed: invalid base URL")
          })
        }
        const body = JSON.stringify(
          toUpstreamBody(plan.request, {
            upstreamModel: options.upstreamModel,
            toolMode: plan.toolMode,
            extraBody,
            constraint: plan
          })
        )
        const whole = request.wholeAnswer === true
        return onCloseSync(run.close).pipe(Effect.zipRight(Effect.sync(() => run.connect(target, body, whole, request.traceparent))))
      })

    // Only a request that needs a constraint waits for the kind (a probe, the first time): no other ever causes one.
    const start = (request: SubmitRunRequest, sink: RunSink): Effect.Effect<void, never, Scope.Scope> =>
      detector === undefined || !wantsConstraint(request, strict, extraBody)
        ? send(request, sink, fixed ?? NO_KIND)
        : Effect.flatMap(detector.kind, (kind) => send(request, sink, kind))

    return { start }
  })

/** `constraints: "auto"`: the kind found out on the first request that needs it (what the node read of `/props` first). */
const autoKind = (options: Options, dispatcher: Undici.Dispatcher): KindDetector =>
  makeKindDetector({
    probe: probeKind(dispatcher, {
      baseUrl: options.baseUrl,
      apiKey: options.apiKey,
      headers: options.headers,
      skipProps: options.propsRead === "other"
    }),
    known: options.propsRead === "llama.cpp" ? LLAMA_CPP : undefined,
    annotations: { upstream_model: options.upstreamModel }
  })

/** Free: an answer that says it is llama.cpp's settles an `auto` kind not known yet (logged when it does). */
const heardBy = (detector: KindDetector, runtime: Runtime.Runtime<never>, upstreamModel: string) =>
(server: string | ReadonlyArray<string> | undefined): void => {
  if (!detector.heard(server)) return
  Runtime.runFork(runtime)(
    Effect.logInfo("upstream kind").pipe(
      Effect.annotateLogs({ upstream_model: upstreamModel, constraints: "llama.cpp", from: "server header" })
    )
  )
}

const requestHeaders = (options: Options, accept: string): Record<string, string> => {
  const headers: Record<string, string> = { accept }
  for (const [name, value] of Object.entries(options.headers ?? {})) headers[name.toLowerCase()] = value
  headers["content-type"] = "application/json"
  if (options.apiKey !== undefined) headers["authorization"] = `Bearer ${Redacted.value(options.apiKey)}`
  return headers
}
