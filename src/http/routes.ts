import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as Effect from "effect/Effect"
import { ChatCompletions } from "../dialects/chat-completions/ChatCompletions.js"
import { EdgeConfig } from "../config/EdgeConfig.js"
import { Metrics } from "../observability/Metrics.js"
import { NodeRegistry } from "../run/NodeRegistry.js"
import { NatsDiscovery } from "../run/transport/nats/EdgeTransport.js"
import * as Option from "effect/Option"
import { allows, makeKeyCheck } from "./Auth.js"
import { Limits } from "./Limits.js"
import { ModelNotFound } from "../chat/errors.js"
import { NoNodeForModel } from "../run/errors.js"
import { BodyTooLarge, InvalidRequest, RouteNotFound, ShuttingDown, Unauthorized } from "./errors.js"
import { Lifecycle } from "./Lifecycle.js"
import { type EdgeError, toHttpError } from "./openaiError.js"
import { decodeBody, toChatRequest } from "./toChatRequest.js"
import { annotateFiberLogs } from "../common/onClose.js"

/**
 * A defect (a bug) while handling a request: logged and answered as a JSON
 * 500, never an empty one. The message says nothing of the defect itself.
 */
const defectResponse = (defect: unknown) =>
  Effect.logError("request failed with a defect").pipe(
    Effect.annotateLogs({ error: clipText(defect instanceof Error ? defect.message : String(defect), 500) }),
    Effect.as(
      HttpServerResponse.unsafeJson(
        { error: { message: "internal error", type: "server_error", param: null, code: null } },
        { status: 500 }
      )
    )
  )

const clipText = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max)}…` : text)

/** Typed errors → their OpenAI answer; defects → a logged JSON 500. */
const answerErrors = <R>(handler: Effect.Effect<HttpServerResponse.HttpServerResponse, EdgeError, R>) =>
  handler.pipe(Effect.catchAll(errorResponse), Effect.catchAllDefect(defectResponse))

export const errorResponse = (e: EdgeError) => {
  const { status, body, headers } = toHttpError(e)
  return HttpServerResponse.unsafeJson(body, headers === undefined ? { status } : { status, headers })
}

const SSE_HEADERS = { "cache-control": "no-cache", "x-accel-buffering": "no" }

/**
 * The request body as text, at most `limit` bytes. A declared length over the
 * limit fails before reading, a chunked body as soon as it passes the limit:
 * the edge middleware (`unreadBody.ts`) then answers with `Connection: close`
 * and reads and drops the rest, bounded, before the connection closes.
 */
const readBody = (limit: number) =>
  Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    const declared = Number(request.headers["content-length"] ?? "0")
    if (declared > limit) return yield* Effect.fail(new BodyTooLarge({ limit }))
    const source = NodeHttpServerRequest.toIncomingMessage(request)
    return yield* Effect.async<string, BodyTooLarge | InvalidRequest>((resume) => {
      const chunks: Array<Buffer> = []
      let size = 0
      const onData = (chunk: Buffer) => {
        size += chunk.length
        if (size > limit) {
          cleanup()
          resume(Effect.fail(new BodyTooLarge({ limit })))
        } else chunks.push(chunk)
      }
      const onEnd = () => {
        cleanup()
        resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")))
      }
      const onError = (e: Error) => {
        cleanup()
        resume(Effect.fail(new InvalidRequest({ message: `could not read the request body: ${e.message}`, param: null })))
      }
      const cleanup = () => {
        source.off("data", onData)
        source.off("end", onEnd)
        source.off("error", onError)
      }
      source.on("data", onData)
      source.on("end", onEnd)
      source.on("error", onError)
      return Effect.sync(cleanup)
    })
  })

export const makeRoutes = Effect.gen(function* () {
  const config = yield* EdgeConfig
  const chat = yield* ChatCompletions
  const metrics = yield* Metrics
  const lifecycle = yield* Lifecycle
  const registry = yield* NodeRegistry
  const discovery = yield* NatsDiscovery
  const checkKey = makeKeyCheck(config.server.apiKeys)
  const limits = yield* Limits

  /** Drain and auth checks shared by every `/v1` route; the caller's key policy when keys are configured. */
  const guard = Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (!(yield* lifecycle.serving)) return yield* Effect.fail(new ShuttingDown())
    const check = checkKey(request.headers["authorization"])
    if (check._tag === "Denied") return yield* Effect.fail(new Unauthorized({ reason: check.reason }))
    if (check._tag === "Granted") yield* annotateFiberLogs({ api_key: check.key.id })
    return check
  })

  const chatCompletions = Effect.gen(function* () {
    const check = yield* guard
    const text = yield* readBody(config.server.maxBodyBytes)
    const wire = yield* decodeBody(text)
    if (!allows(check, wire.model)) return yield* Effect.fail(new ModelNotFound({ model: wire.model }))
    const local = config.models.some((m) => m.id === wire.model)
    const announced = local ? Option.none() : yield* discovery.findModel(wire.model)
    // A model some node served before, with no live node now (node gone, bus down): an outage, not a 404.
    if (!local && Option.isNone(announced) && (yield* discovery.wasAnnounced(wire.model))) {
      return yield* Effect.fail(new NoNodeForModel({ model: wire.model }))
    }
    const request = yield* toChatRequest(config, wire, Option.getOrUndefined(announced))
    yield* annotateFiberLogs({ model: request.submit.model, stream: request.stream })
    yield* limits.acquire(check._tag === "Granted" ? check.key : undefined)
    if (!request.stream) return HttpServerResponse.unsafeJson(yield* chat.complete(request))
    const body = yield* chat.stream(request)
    return HttpServerResponse.stream(body, { contentType: "text/event-stream", headers: SSE_HEADERS })
  }).pipe(answerErrors)

  const models = Effect.gen(function* () {
    const check = yield* guard
    const remote = Array.from((yield* discovery.announcedModels).values()).flat().map((m) => m.id)
    const ids = [...new Set([...config.models.map((m) => m.id), ...remote])]
    return HttpServerResponse.unsafeJson({
      object: "list",
      data: ids
        .filter((id) => allows(check, id))
        .map((id) => ({ id, object: "model", created: 0, owned_by: "iop" }))
    })
  }).pipe(answerErrors)

  const health = lifecycle.serving.pipe(
    Effect.map((ok) =>
      HttpServerResponse.unsafeJson({ status: ok ? "ok" : "unavailable" }, { status: ok ? 200 : 503 })
    )
  )

  const metricsText = registry.nodes.pipe(
    Effect.flatMap(metrics.nodes),
    Effect.zipRight(metrics.exposition),
    Effect.map(({ body, contentType }) => HttpServerResponse.text(body, { contentType }))
  )

  const notFound = Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    return errorResponse(new RouteNotFound({ method: request.method, path: request.url }))
  })

  return HttpRouter.empty.pipe(
    HttpRouter.post("/v1/chat/completions", chatCompletions),
    HttpRouter.get("/v1/models", models),
    HttpRouter.get("/healthz", health),
    HttpRouter.get("/metrics", metricsText),
    HttpRouter.all("*", notFound)
  )
})
