import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Edge } from "iop-edge"
import { ShoutModel } from "./provider.js"

/** The app's own middleware: a header on every answer, the edge's included. */
const poweredBy = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.map(app, HttpServerResponse.setHeader("x-powered-by", "example-app"))

/** The app: its own routes, the edge's beside them (their middleware on them), under its own middleware. */
export const app = Effect.gen(function* () {
  const edgeRoutes = yield* Edge.routes
  const router = HttpRouter.empty.pipe(
    HttpRouter.get("/hello", HttpServerResponse.text("hello from the app")),
    HttpRouter.concat(edgeRoutes),
    HttpRouter.all("*", HttpServerResponse.text("not here", { status: 404 }))
  )
  return poweredBy(yield* HttpRouter.toHttpApp(router))
})

/**
 * The edge's services: no configured models (only ours), our provider, config written in code. The app is reached
 * as `app.example.com` (behind its proxy): the edge's routes accept that Host beside the loopback names.
 */
export const EdgeServices = Edge.layerFrom({ metrics: Edge.layerMetrics, nodes: ShoutModel }).pipe(
  Layer.provideMerge(Edge.layerEdgeConfig({
    models: [],
    log: { level: "warn" },
    runs: { idleTimeoutMs: 30_000 },
    server: { allowedHosts: ["app.example.com"] }
  }))
)

/** The app served by whatever HttpServer the caller provides. */
export const AppLive = Layer.unwrapEffect(Effect.map(app, (a) => HttpServer.serve(a))).pipe(
  Layer.provide(EdgeServices)
)
