import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as HttpServer from "@effect/platform/HttpServer"
import type * as HttpServerError from "@effect/platform/HttpServerError"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { createParser, type EventSourceMessage } from "eventsource-parser"
import { EdgeConfig } from "../config/EdgeConfig.js"
import { layerWithInternals } from "../compose.js"
import { layerApp as appLayer, layerNodeServerWith as nodeServerLayerWith } from "../http/HttpLive.js"
import * as Logging from "../observability/Logging.js"
import * as TestEdge from "./TestEdge.js"

/** One server-sent event as the edge wrote it: `data` is the JSON text (or `[DONE]`), `event` its name if any. */
export interface SseEvent {
  readonly event?: string
  readonly id?: string
  readonly data: string
}

/** The edge answered with a status other than 2xx: its status and its JSON error body. */
export class ErrorResponse extends Data.TaggedError("ErrorResponse")<{
  readonly status: number
  readonly body: unknown
}> {
  override get message(): string {
    return `the edge answered HTTP ${this.status}`
  }
}

/** The events of a `text/event-stream` body, parsed with `eventsource-parser`, as they arrive. */
export const sseEvents = <E, R>(body: Stream.Stream<Uint8Array, E, R>): Stream.Stream<SseEvent, E, R> =>
  Stream.suspend(() => {
    let parsed: Array<SseEvent> = []
    const parser = createParser({
      onEvent: (e: EventSourceMessage) => {
        parsed.push({
          data: e.data,
          ...(e.event !== undefined ? { event: e.event } : {}),
          ...(e.id !== undefined ? { id: e.id } : {})
        })
      }
    })
    const take = () => {
      const out = parsed
      parsed = []
      return out
    }
    return body.pipe(
      Stream.decodeText(),
      Stream.mapConcat((text) => {
        parser.feed(text)
        return take()
      })
    )
  })

/** A 2xx response as it is, any other as an `ErrorResponse` with its JSON body (or its text, if not JSON). */
const ok = (response: HttpClientResponse.HttpClientResponse) =>
  response.status >= 200 && response.status < 300
    ? Effect.succeed(response)
    : Effect.flatMap(
      Effect.orElse(response.json, () => response.text),
      (body) => Effect.fail(new ErrorResponse({ status: response.status, body }))
    )

export declare namespace TestServer {
  export interface Service {
    /** `http://127.0.0.1:PORT`. */
    readonly url: string
    /** `url + "/v1"`: the OpenAI SDK's `baseURL`. */
    readonly baseURL: string
    /** An `HttpClient` whose requests go to the server: `client.get("/v1/models")`. */
    readonly client: HttpClient.HttpClient
    /** POSTs `body` to `/v1/chat/completions` and returns the JSON answer; a non-2xx answer fails with `ErrorResponse`. */
    readonly chat: (body: object) => Effect.Effect<unknown, HttpClientError.HttpClientError | ErrorResponse>
    /**
     * POSTs `body` with `stream: true` to `/v1/chat/completions`: the SSE events, as they arrive, up to and with
     * `[DONE]`. An answer refused before the stream began (4xx/5xx JSON) fails with `ErrorResponse`. Stopping
     * early (`Stream.take`, interruption) closes the connection: the edge cancels the run.
     */
    readonly chatStream: (body: object) => Stream.Stream<SseEvent, HttpClientError.HttpClientError | ErrorResponse>
    /** Any request whose answer is an event stream (`/v1/responses`, `/v1/messages`), as its events. */
    readonly sse: (
      request: HttpClientRequest.HttpClientRequest
    ) => Stream.Stream<SseEvent, HttpClientError.HttpClientError | ErrorResponse>
  }
}

const make = Effect.gen(function* () {
  const server = yield* HttpServer.HttpServer
  const address = server.address
  if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("TestServer: not a TCP server")
  const url = `http://127.0.0.1:${address.port}`
  const client = HttpClient.mapRequest(yield* HttpClient.HttpClient, HttpClientRequest.prependUrl(url))
  const post = (body: object) => HttpClientRequest.post("/v1/chat/completions").pipe(HttpClientRequest.bodyUnsafeJson(body))
  const sse = (request: HttpClientRequest.HttpClientRequest) =>
    Stream.unwrap(Effect.map(Effect.flatMap(client.execute(request), ok), (response) => sseEvents(response.stream)))
  const service: TestServer.Service = {
    url,
    baseURL: `${url}/v1`,
    client,
    chat: (body) => client.execute(post(body)).pipe(Effect.flatMap(ok), Effect.flatMap((response) => response.json)),
    chatStream: (body) => sse(post({ ...body, stream: true })),
    sse
  }
  return service
})

/** Without keep-alive: no idle connection is left to the server when a test ends. */
const ClientLive = NodeHttpClient.layerWithoutAgent.pipe(Layer.provide(NodeHttpClient.makeAgentLayer({ keepAlive: false })))

/** The edge's app on its own Node server (the config's server options), on an ephemeral port of 127.0.0.1. */
const ServingLive: Layer.Layer<TestServer, HttpServerError.ServeError, TestEdge.Services> = Layer.unwrapEffect(
  Effect.map(EdgeConfig, (config) =>
    Layer.merge(layerWithInternals(appLayer), Layer.effect(TestServer, make)).pipe(
      Layer.provide(ClientLive),
      Layer.provide(nodeServerLayerWith({ ...config.server, host: "127.0.0.1", port: 0 })),
      // The requests' fibers (and the lines their finalizers log: access log, run summary) at the config's level.
      (serving) => Layer.locally(serving, FiberRef.currentMinimumLogLevel, Logging.levels[config.log.level])
    ))
)

/** `TestServer.layer`: `TestEdge.layer`'s services served on a Node server, plus the `TestServer`. */
export interface ServerLayer {
  (options?: TestEdge.Options): Layer.Layer<TestServer | TestEdge.Services, TestEdge.BuildError | HttpServerError.ServeError>
  <ROut, E, RIn>(
    options: TestEdge.Options<ROut, E, RIn>
  ): Layer.Layer<
    TestServer | ROut | TestEdge.Services,
    E | TestEdge.BuildError | HttpServerError.ServeError,
    Exclude<RIn, TestEdge.Services>
  >
}

function layer(options?: TestEdge.Options): Layer.Layer<TestServer | TestEdge.Services, TestEdge.BuildError | HttpServerError.ServeError>
function layer<ROut, E, RIn>(
  options: TestEdge.Options<ROut, E, RIn>
): Layer.Layer<
  TestServer | ROut | TestEdge.Services,
  E | TestEdge.BuildError | HttpServerError.ServeError,
  Exclude<RIn, TestEdge.Services>
>
// The overloads type the result; the implementation only forwards the layers.
function layer(options: TestEdge.Options<never, unknown, unknown> = {}): Layer.Layer<never, unknown, unknown> {
  return Layer.provideMerge(ServingLive, TestEdge.layer(options))
}

/**
 * The edge served over HTTP in this process, for clients that speak HTTP: the openai SDK
 * (`new OpenAI({ baseURL: server.baseURL, apiKey: "test" })`), `fetch`, an `HttpClient`. `TestServer.layer`
 * takes `TestEdge.layer`'s options and provides the same services, plus this one: the server's `url`, a
 * `client` pointed at it, and `chat` / `chatStream` for Chat Completions.
 *
 * The app is the edge's (`Edge.httpApp`: its routes, its 404s, its middleware) on the edge's own Node server with the
 * config's server options, bound to an ephemeral port of 127.0.0.1. It is served without the graceful
 * shutdown of `Edge.layerServe`: when the test's scope closes, every connection is closed at once (runs still open
 * are cancelled) instead of drained, so a test that leaves a stream open does not wait for a grace period.
 * Requests travel over a real socket, which needs no clock: under `it.effect` the edge still runs on the
 * `TestClock` it was built with (an idle timeout over HTTP is proven with `TestClock.adjust`), and a client that
 * waits on real timers (an SDK's retries) runs under `it.live` / `it.scopedLive`.
 */
export class TestServer extends Context.Tag("iop-edge/testing/TestServer")<TestServer, TestServer.Service>() {
  static readonly layer: ServerLayer = layer
}
