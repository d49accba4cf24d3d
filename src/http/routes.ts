import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as ChatCompletions from "../dialects/chat-completions/dialect.js"
import * as Responses from "../dialects/responses/Responses.js"
import * as Messages from "../dialects/messages/Messages.js"
import { EdgeConfig } from "../config/EdgeConfig.js"
import type { Dialect, DialectEndpoint, DialectState, EdgeError, ErrorAnswer, RoutePath, RunInfo } from "../dialects/Dialect.js"
import { parseListQuery } from "../dialects/responses/stored.js"
import { StoredResponses } from "../dialects/responses/StoredResponses.js"
import { Gateway } from "../chat/Gateway.js"
import { clip } from "../common/clip.js"
import { Metrics } from "../observability/Metrics.js"
import { NodeRegistry } from "../run/NodeRegistry.js"
import { allows, grantedKey, makeKeyCheck, presentedKey } from "./Auth.js"
import { InternalError, InvalidRequest, RouteNotFound, ShuttingDown, Unauthorized } from "../chat/EdgeError.js"
import { ModelNotFound } from "../chat/errors.js"
import { Lifecycle } from "./Lifecycle.js"
import { readBody } from "./readBody.js"
import { streamResponse } from "./streamResponse.js"
import { toHttpError } from "../dialects/openaiError.js"
import { annotateFiberLogs } from "../common/onClose.js"

/** An error answer, as JSON with its status and headers. */
const answer = (a: ErrorAnswer) =>
  HttpServerResponse.unsafeJson(a.body, a.headers === undefined ? { status: a.status } : { status: a.status, headers: a.headers })

/** An error in OpenAI's shape (routes that belong to no dialect, the browser gate). */
export const errorResponse = (e: EdgeError) => answer(toHttpError(e))

/**
 * Typed errors → the API's answer; a defect (a bug) → logged, and answered as a JSON 500 in the API's shape that
 * says nothing of the defect itself, never an empty one.
 */
const answerErrors = <R>(
  render: (e: EdgeError) => ErrorAnswer,
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, EdgeError, R>
) =>
  handler.pipe(
    Effect.catchAll((e) => Effect.succeed(answer(render(e)))),
    Effect.catchAllDefect((defect) =>
      Effect.logError("request failed with a defect").pipe(
        Effect.annotateLogs({ error: clip(defect instanceof Error ? defect.message : String(defect), 500) }),
        Effect.as(answer(render(new InternalError())))
      )
    )
  )

const SSE_HEADERS = { "cache-control": "no-cache", "x-accel-buffering": "no" }

/** What the routes every API shares need of an API: whether a request speaks it, and its shapes. */
type SharedShapes = Pick<Dialect<unknown>, "speaks" | "modelList" | "modelEntry" | "error">

/** The APIs the edge speaks, Chat Completions the default shape of the routes they share. */
const SHARED: ReadonlyArray<SharedShapes> = [ChatCompletions.dialect, Responses.dialect, Messages.dialect]

/** The API a request to a shared route (the model list, a route the edge does not have) speaks, by its headers. */
const spokenBy = Effect.map(
  HttpServerRequest.HttpServerRequest,
  (r): SharedShapes => SHARED.find((d) => d.speaks(r.headers)) ?? ChatCompletions.dialect
)

/** The edge server's answer to a route it does not have, in the caller's API's shape. */
export const notFound = Effect.gen(function* () {
  const request = yield* HttpServerRequest.HttpServerRequest
  return answer((yield* spokenBy).error(new RouteNotFound({ method: request.method, path: request.url })))
})

/** The model id of a `/v1/models/{id}` URL (percent-decoded, without a query), if it is one. */
export const modelNameOf = (url: string): string | undefined => {
  const path = url.split("?")[0] ?? ""
  const prefix = "/v1/models/"
  if (!path.startsWith(prefix) || path.length === prefix.length) return undefined
  try {
    return decodeURIComponent(path.slice(prefix.length))
  } catch {
    return undefined
  }
}

/** A stored response's URL: `/v1/responses/{id}` or `/v1/responses/{id}/input_items`, with its query. */
export const storedResponseOf = (
  url: string
): { readonly id: string; readonly items: boolean; readonly query: URLSearchParams } | undefined => {
  const [path = "", query = ""] = url.split("?", 2)
  const m = /^\/v1\/responses\/([^/]+)(\/input_items)?\/?$/.exec(path)
  if (m === null || m[1] === undefined) return undefined
  try {
    return { id: decodeURIComponent(m[1]), items: m[2] !== undefined, query: new URLSearchParams(query) }
  } catch {
    return undefined
  }
}

/** One of the edge's routes: its method, its path as written (no parameters), its handler. */
export interface EdgeRoute {
  readonly method: "GET" | "HEAD" | "POST" | "DELETE"
  readonly path: RoutePath
  readonly handler: Effect.Effect<
    HttpServerResponse.HttpServerResponse,
    never,
    HttpServerRequest.HttpServerRequest | Scope.Scope
  >
}

export const makeRoutes = Effect.gen(function* () {
  const config = yield* EdgeConfig
  const gateway = yield* Gateway
  const metrics = yield* Metrics
  const lifecycle = yield* Lifecycle
  const registry = yield* NodeRegistry
  const stored = yield* StoredResponses
  const checkKey = makeKeyCheck(config.server.apiKeys)

  /** Drain and auth checks shared by every `/v1` route; the caller's key when keys are configured. */
  const guard = Effect.gen(function* () {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (!(yield* lifecycle.serving)) return yield* Effect.fail(new ShuttingDown())
    const check = checkKey(presentedKey(request.headers))
    if (check._tag === "Denied") return yield* Effect.fail(new Unauthorized({ reason: check.reason }))
    if (check._tag === "Granted") yield* annotateFiberLogs({ api_key: check.key.id })
    return grantedKey(check)
  })

  /**
   * One dialect's route: transport (guard, body) here, then the door every caller goes through (`Gateway`); an
   * API that keeps state between requests (`state`: the Responses API's stored responses) resolves the request's
   * references once its model was allowed, and keeps its response before it is answered.
   */
  const serve = <W>(dialect: Dialect<W>, state?: DialectState<W>) =>
    answerErrors(
      dialect.error,
      Effect.gen(function* () {
        const key = yield* guard
        const text = yield* readBody(config.server.maxBodyBytes)
        const decoded = yield* dialect.decode(text)
        const model = yield* gateway.model(dialect.model(decoded), key)
        const wire = state === undefined ? decoded : yield* state.resolve(decoded, key)
        const request = yield* dialect.toChatRequest(wire, model, gateway.requestLimits)
        yield* annotateFiberLogs({ api: dialect.api, model: model.id, stream: request.stream })
        if (!request.stream) {
          const body = yield* gateway.complete(request, (run, emissions) => dialect.body(wire, request, run, emissions), key)
          return HttpServerResponse.unsafeJson(state === undefined ? body : yield* state.keep(wire, body, key))
        }
        const render = state === undefined
          ? (run: RunInfo) => dialect.streamRenderer(wire, request, run)
          : (run: RunInfo) => state.streamRenderer(wire, request, run, key)
        const body = yield* gateway.stream(request, render, key)
        return yield* streamResponse(body, { contentType: "text/event-stream", headers: SSE_HEADERS })
      })
    )

  /**
   * `GET /v1/responses/{id}` (its `stream=true` replay is not kept), `GET /v1/responses/{id}/input_items` and
   * `DELETE /v1/responses/{id}`: the caller's stored responses, in OpenAI's shapes.
   */
  const storedResponse = (method: "GET" | "DELETE") =>
    answerErrors(
      Responses.dialect.error,
      Effect.gen(function* () {
        const key = yield* guard
        const request = yield* HttpServerRequest.HttpServerRequest
        const target = storedResponseOf(request.url)
        if (target === undefined || (method === "DELETE" && target.items)) {
          return yield* Effect.fail(new RouteNotFound({ method: request.method, path: request.url }))
        }
        if (method === "DELETE") return HttpServerResponse.unsafeJson(yield* stored.remove(target.id, key))
        if (target.items) {
          const query = yield* parseListQuery(target.query)
          return HttpServerResponse.unsafeJson(yield* stored.inputItems(target.id, query, key))
        }
        if (target.query.get("stream") === "true") {
          return yield* Effect.fail(new InvalidRequest({ message: "stream: a stored response is not replayed as a stream by this edge: leave stream unset", param: "stream" }))
        }
        return HttpServerResponse.unsafeJson(yield* stored.retrieve(target.id, key))
      })
    )

  /** The names (ids and aliases) of the models a caller's key may use. */
  const visibleNames = (key: ReturnType<typeof grantedKey>): ReadonlySet<string> => {
    const names = new Set<string>()
    // As the door allows them: the id when the key names it, an alias when the key names the id or that alias.
    for (const m of registry.models()) {
      if (allows(key, m.id)) names.add(m.id)
      for (const alias of m.aliases) if (allows(key, m.id, alias)) names.add(alias)
    }
    return names
  }

  const models = Effect.flatMap(spokenBy, (dialect) =>
    answerErrors(
      dialect.error,
      Effect.map(guard, (key) => HttpServerResponse.unsafeJson(dialect.modelList(Array.from(visibleNames(key)))))
    ))

  /** `GET /v1/models/{id}` (the SDKs' `models.retrieve`): one model the caller may use, else the API's 404. */
  const model = Effect.flatMap(spokenBy, (dialect) =>
    answerErrors(
      dialect.error,
      Effect.gen(function* () {
        const key = yield* guard
        const request = yield* HttpServerRequest.HttpServerRequest
        const name = modelNameOf(request.url)
        if (name === undefined || !visibleNames(key).has(name)) {
          return yield* Effect.fail(new ModelNotFound({ model: name ?? request.url }))
        }
        return HttpServerResponse.unsafeJson(dialect.modelEntry(name))
      })
    ))

  /** An API's endpoint beside its main one: the same guard and body limit, the model it names allowed; no run. */
  const endpoint = (dialect: SharedShapes, e: DialectEndpoint) =>
    answerErrors(
      dialect.error,
      Effect.gen(function* () {
        const key = yield* guard
        const call = yield* e.handle(yield* readBody(config.server.maxBodyBytes))
        yield* gateway.model(call.model, key)
        return HttpServerResponse.unsafeJson(call.answer())
      })
    )

  /** `HEAD /` and `GET /`: Claude Code probes its base URL (without a key) before it starts. */
  const root = Effect.succeed(HttpServerResponse.empty({ status: 200 }))

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

  /** An API's routes: its main one and its own endpoints. */
  const api = <W>(dialect: Dialect<W>, state?: DialectState<W>): ReadonlyArray<EdgeRoute> => [
    { method: "POST", path: dialect.path, handler: serve(dialect, state) },
    ...dialect.endpoints.map((e): EdgeRoute => ({ method: "POST", path: e.path, handler: endpoint(dialect, e) }))
  ]

  // Adding an API is its folder and one line here (and in SHARED).
  const table: ReadonlyArray<EdgeRoute> = [
    ...api(ChatCompletions.dialect),
    ...api(Responses.dialect, stored),
    { method: "GET", path: "/v1/responses/*", handler: storedResponse("GET") },
    { method: "DELETE", path: "/v1/responses/*", handler: storedResponse("DELETE") },
    ...api(Messages.dialect),
    { method: "HEAD", path: "/", handler: root },
    { method: "GET", path: "/", handler: root },
    { method: "GET", path: "/v1/models", handler: models },
    { method: "GET", path: "/v1/models/*", handler: model },
    { method: "GET", path: "/healthz", handler: health },
    { method: "GET", path: "/metrics", handler: metricsText }
  ]
  return table
})

/** The routes as the platform's router (the library's `routes`, and the server's match of any other URL form). */
export const toRouter = (table: ReadonlyArray<EdgeRoute>): HttpRouter.HttpRouter<never, Scope.Scope> =>
  HttpRouter.fromIterable(table.map((r) => HttpRouter.makeRoute(r.method, r.path, r.handler)))
