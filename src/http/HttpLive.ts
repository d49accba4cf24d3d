import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import type * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as LogLevelM from "effect/LogLevel"
import type * as Scope from "effect/Scope"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import { randomUUID } from "node:crypto"
import { createServer, type Server } from "node:http"
import type { Gateway } from "../chat/Gateway.js"
import type { StoredResponses } from "../dialects/responses/StoredResponses.js"
import { EdgeConfig, type ServerConfig } from "../config/EdgeConfig.js"
import * as Logging from "../observability/Logging.js"
import { Metrics } from "../observability/Metrics.js"
import type { NodeRegistry } from "../run/NodeRegistry.js"
import { HostNotAllowed, OriginNotAllowed } from "../chat/EdgeError.js"
import { Lifecycle } from "./Lifecycle.js"
import { Shutdown } from "./Shutdown.js"
import { nodeSource } from "./nodeSource.js"
import { fromNodeServer, Listener } from "./Listener.js"
import { decide, makeOriginPolicy, type OriginDecision } from "./origin.js"
import { type RouteLabel, routeLabel, UNMATCHED } from "../observability/routeLabel.js"
import * as Tracing from "../observability/Tracing.js"
import { type EdgeRoute, errorResponse, makeRoutes, notFound, toRouter } from "./routes.js"
import { applyPlan, planUnread } from "./unreadBody.js"
import { annotateFiberLogs, onCloseLogged, onCloseSync } from "../common/onClose.js"

const REQUEST_ID = /^[\w.:-]{1,128}$/

/** The edge's answer before (or instead of) the routes: a refused Host or Origin, a CORS preflight. */
const browserGate = <E, R>(
  decision: OriginDecision,
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> => {
  switch (decision._tag) {
    case "HostRefused":
      return Effect.succeed(errorResponse(new HostNotAllowed({ host: decision.host })))
    case "OriginRefused":
      return Effect.succeed(errorResponse(new OriginNotAllowed({ origin: decision.origin })))
    case "Preflight":
      return Effect.succeed(HttpServerResponse.empty({ status: 204, headers: decision.headers }))
    case "Pass":
      return Object.keys(decision.headers).length === 0
        ? app
        : Effect.map(app, HttpServerResponse.setHeaders(decision.headers))
  }
}

/**
 * Request id, open-request tracking, the Host/Origin checks, one access-log line per request (written when its
 * body ends), and the close of a connection whose request body was not read or that is answered while draining.
 * The request's fiber logs at `level` from here on (not `locally`): the access log is written when the body
 * ends, in that fiber.
 */
const edgeMiddleware = (
  lifecycle: Lifecycle.Service,
  metrics: Metrics.Service,
  server: ServerConfig,
  level: LogLevel.LogLevel
): EdgeMiddleware => {
  const policy = makeOriginPolicy(server)
  const setLevel = Logging.setFiberLogLevel(level)
  return (app) =>
    Effect.gen(function* () {
      yield* setLevel
      const request = yield* HttpServerRequest.HttpServerRequest
      const given = request.headers["x-request-id"]
      const requestId = given !== undefined && REQUEST_ID.test(given) ? given : randomUUID()
      const route = routeLabel(request.url)
      const { startedAt, span } = yield* beginRequest(request, route)
      yield* annotateFiberLogs(
        span === undefined ? { request_id: requestId } : { request_id: requestId, ...Tracing.logIds(span.span) }
      )
      yield* lifecycle.track
      // Registered before the app's own finalizers, so it runs after them: the span ends after the run's.
      let status: number | undefined
      if (span !== undefined) {
        span.span.attribute("iop.request_id", requestId)
        yield* onCloseSync(() => endRequestSpan(span, status))
      }
      const routed = yield* browserGate(decide(policy, request), span === undefined ? app : Effect.withParentSpan(app, span.span))
      const source = nodeSource(request)
      let response = routed
      // Behind a web handler (`HttpApp.toWebHandler`) there is no connection of the edge's to close or drain.
      if (source !== undefined) {
        const unread = planUnread({
          headers: request.headers,
          complete: source.complete,
          maxBodyBytes: server.maxBodyBytes
        })
        // While draining every answer closes its connection, so that none is left idle for the listener's close to cut.
        const plan = unread._tag === "Keep" && (yield* lifecycle.draining) ? ({ _tag: "Close" } as const) : unread
        response = applyPlan(routed, plan, source, server.requestTimeoutMs)
      }
      status = response.status
      const path = request.url.split("?")[0] ?? request.url
      yield* onCloseLogged(
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          yield* metrics.httpResponse({ route, status: response.status })
          if (route === "/healthz" || route === "/metrics") return
          yield* Logging.logAnnotated(LogLevelM.Info, "http request", () => ({
            method: request.method,
            path,
            status: response.status,
            duration_ms: now - startedAt
          }))
        })
      )
      return HttpServerResponse.setHeader(response, "x-request-id", requestId)
    })
}

/** Routes whose requests get no span: probes and scrapes, not the traffic a trace is for. */
const UNTRACED: ReadonlySet<RouteLabel> = new Set(["/healthz", "/metrics"])

/**
 * When the request started and, when the fiber traces, its span (SERVER, `{method} {route}`): a child of the span
 * the request already runs in (a host app's) or of the client's `traceparent`. One step, traced or not.
 */
const beginRequest = (
  request: HttpServerRequest.HttpServerRequest,
  route: RouteLabel
): Effect.Effect<{ readonly startedAt: number; readonly span: Tracing.EdgeSpan | undefined }> =>
  Effect.withFiberRuntime((fiber) => {
    const startedAt = Context.get(fiber.currentDefaultServices, Clock.Clock).unsafeCurrentTimeMillis()
    const matched = route === UNMATCHED ? undefined : route
    const span = UNTRACED.has(route)
      ? undefined
      : Tracing.begin(
        fiber,
        matched === undefined ? request.method : `${request.method} ${matched}`,
        "server",
        Tracing.requestParent(fiber, request.headers["traceparent"])
      )
    if (span !== undefined) {
      Tracing.annotate(span.span, {
        "http.request.method": request.method,
        "http.route": matched,
        "url.path": request.url.split("?")[0]
      })
    }
    return Effect.succeed({ startedAt, span })
  })

/** The request's span ends with its answer's status (an error at 5xx); none when the client left first. */
const endRequestSpan = (span: Tracing.EdgeSpan, status: number | undefined): void => {
  if (status !== undefined) span.span.attribute("http.response.status_code", status)
  if (status !== undefined && status >= 500) span.span.attribute("error.type", String(status))
  Tracing.end(span, status !== undefined && status >= 500 ? new Error(`HTTP ${status}`) : undefined)
}

/** A middleware that keeps the app's error and requirement types (the platform's `HttpMiddleware` erases them). */
export type EdgeMiddleware = <E, R>(app: HttpApp.Default<E, R>) => HttpApp.Default<E, R | Scope.Scope>

/** What the edge's routes and middleware read. */
export type RouteServices = EdgeConfig | Gateway | Metrics | Lifecycle | NodeRegistry | StoredResponses

/**
 * The edge's HTTP API as a router to mount beside your own routes (`HttpRouter.concat`, `HttpRouter.mount`):
 * `/v1/chat/completions`, `/v1/responses` (+ `GET|DELETE /{id}`, `GET /{id}/input_items`), `/v1/messages`
 * (+ `count_tokens`), `/v1/models` (+ `/{id}`), `GET|HEAD /`,
 * `/healthz`, `/metrics`, and `OPTIONS` of each (CORS preflights). No catch-all, no server of its own. The edge's
 * middleware (request id, drain tracking, Host/Origin and CORS, access log, unread bodies) is on each of these
 * routes and on nothing else: mounting them never changes how the app's own routes answer.
 */
export const routes: Effect.Effect<HttpRouter.HttpRouter, never, RouteServices> = Effect.gen(function* () {
  const table = yield* makeRoutes
  const wrap = yield* middleware
  const paths = Array.from(new Set(table.map((r) => r.path)))
  // A preflight of one of the edge's paths is the edge's to answer (the middleware's browser gate); one that is
  // not a preflight gets the edge's 404, as on the edge's own server.
  const preflights = paths.map((path) => HttpRouter.makeRoute("OPTIONS", path, notFound))
  const router = HttpRouter.concat(toRouter(table), HttpRouter.fromIterable(preflights))
  return HttpRouter.use(router, (handler) => wrap(handler))
})

/**
 * The routes served without the router for a request whose URL is a route's path as written (what clients send):
 * a lookup on method and path, then the handler, interruptible as the router runs it. Any other form of URL (a
 * query, a trailing slash, another case, `HEAD` of a `GET` route) and anything unknown goes to `router`, whose
 * matching is the platform's. The router's per-request work (its context copy, route context, `locally`) costs
 * about a tenth of a short request's Effect steps.
 */
const dispatch = <E, R>(
  table: ReadonlyArray<EdgeRoute>,
  router: HttpApp.Default<E, R>
): HttpApp.Default<E, R | Scope.Scope> => {
  const byMethod = new Map<string, Map<string, EdgeRoute["handler"]>>()
  for (const r of table) {
    const paths = byMethod.get(r.method) ?? new Map<string, EdgeRoute["handler"]>()
    paths.set(r.path, Effect.interruptible(r.handler))
    byMethod.set(r.method, paths)
  }
  type Requires = R | Scope.Scope | HttpServerRequest.HttpServerRequest
  return Effect.withFiberRuntime<HttpServerResponse.HttpServerResponse, E, Requires>((fiber) => {
    const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
    const handler = byMethod.get(request.method)?.get(request.url)
    if (handler === undefined) return router
    // What the router records on a request's span, for a host app that traces.
    const span = Context.getOption(fiber.currentContext, Tracer.ParentSpan)
    if (span._tag === "Some" && span.value._tag === "Span") span.value.attribute("http.route", request.url)
    return handler
  })
}

/**
 * The edge's middleware, to wrap the app that serves `routes`: request id (`x-request-id`), open-request
 * tracking for the drain, the Host/Origin checks and CORS, one access-log line per request, and on a Node server
 * the handling of an unread request body.
 */
export const middleware: Effect.Effect<EdgeMiddleware, never, EdgeConfig | Metrics | Lifecycle> = Effect.gen(
  function* () {
    const config = yield* EdgeConfig
    return edgeMiddleware(yield* Lifecycle, yield* Metrics, config.server, Logging.levels[config.log.level])
  }
)

/** The edge server's app: `routes`, a JSON 404 in the caller's API's shape for anything else, `middleware`. */
export const httpApp = Effect.gen(function* () {
  const table = yield* makeRoutes
  const wrap = yield* middleware
  // Built once: `toHttpApp` constructs the route tree, which must not happen per request.
  const app = yield* HttpRouter.toHttpApp(HttpRouter.all(toRouter(table), "*", notFound))
  // Applied to the app itself (not as `serve`'s middleware, which runs after the response is written); it sets
  // the request fiber's log level before any handler runs.
  return wrap(dispatch(table, app))
})

/** Serves the edge's app on an HttpServer that the caller provides. */
export const layerApp: Layer.Layer<never, never, HttpServer.HttpServer | RouteServices> = Layer.unwrapEffect(
  Effect.map(httpApp, (app) => HttpServer.serve(app))
)

/**
 * On shutdown (its finalizer runs before the server closes): the edge's drain (`Shutdown`: refuse new requests
 * with 503, let open ones finish within `server.shutdownGraceMs`, cancel what is left), then the listener stops
 * accepting while the routes are still installed, so a request already on a connection is answered 503 rather
 * than reset.
 */
export const layerGracefulShutdown: Layer.Layer<never, never, HttpServer.HttpServer | Shutdown> = Layer.scopedDiscard(
  Effect.gen(function* () {
    yield* HttpServer.HttpServer
    const shutdown = yield* Shutdown
    yield* HttpServer.logAddress
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        const deadline = yield* shutdown.drain
        // Connections still open after it (clients that stopped reading) are closed by the server's own
        // finalizer: nothing waits on a client past the bound.
        const listener = yield* Effect.serviceOption(Listener)
        if (Option.isSome(listener)) {
          const budget = Math.max(50, deadline - (yield* Clock.currentTimeMillis))
          const closed = yield* Effect.forkDaemon(Effect.interruptible(listener.value.close(budget))).pipe(
            Effect.flatMap(Fiber.join)
          )
          if (!closed) yield* Effect.logWarning("connections still open after the drain: closing them")
        }
        yield* Effect.logInfo("stopped")
      })
    )
  })
)

/**
 * Node's options for the configured slow-client timeouts. Node enforces both
 * only when it checks its connections, every `connectionsCheckingInterval`
 * (default 30 s): checked at a quarter of the shorter timeout, at most every
 * second, each holds to within a second.
 */
export const nodeServerOptions = (server: Pick<ServerConfig, "headersTimeoutMs" | "requestTimeoutMs">) => ({
  keepAliveTimeout: 5_000,
  headersTimeout: server.headersTimeoutMs,
  requestTimeout: server.requestTimeoutMs,
  connectionsCheckingInterval: Math.max(
    1,
    Math.min(1_000, Math.floor(Math.min(server.headersTimeoutMs, server.requestTimeoutMs) / 4))
  )
})

/**
 * A Node HTTP server bound to the configured host and port, and its
 * `Listener`. After the drain (which runs first, and closes the listener)
 * every connection still open is one that did not finish in time: it is
 * closed so that the server's close does not wait for clients. `server` is
 * for tests that watch its connections.
 */
export const layerNodeServerWith = (
  config: ServerConfig,
  server: Server = createServer(nodeServerOptions(config))
): Layer.Layer<HttpServer.HttpServer | Listener, HttpServerError.ServeError> => {
  server.maxConnections = config.maxConnections
  const closeConnections = Layer.scopedDiscard(Effect.addFinalizer(() => Effect.sync(() => server.closeAllConnections())))
  return Layer.merge(closeConnections, Layer.succeed(Listener, fromNodeServer(server))).pipe(
    Layer.provideMerge(NodeHttpServer.layerServer(() => server, { host: config.host, port: config.port }))
  )
}

/** The edge's Node HTTP server, for the config's `server` section. */
export const layerNodeServer: Layer.Layer<HttpServer.HttpServer | Listener, HttpServerError.ServeError, EdgeConfig> =
  Layer.unwrapEffect(EdgeConfig.pipe(Effect.map((config) => layerNodeServerWith(config.server))))
