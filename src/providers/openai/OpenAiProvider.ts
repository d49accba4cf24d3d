import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import { identity } from "effect/Function"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as RunEvent from "../../run/RunEvent.js"
import type { SubmitRunRequest } from "../../run/SubmitRunRequest.js"
import type { Provider } from "../Provider.js"
import * as Mapper from "./toRunEvents.js"
import { toUpstreamBody } from "./upstreamRequest.js"
import { makeUpstreamDecoder } from "./upstreamSse.js"
import { clip, errorBodyMessage } from "./upstreamWire.js"

/**
 * A provider for any OpenAI-compatible upstream (llama.cpp, vLLM, Ollama,
 * LM Studio, OpenAI): one streamed `POST {baseUrl}/chat/completions` per run.
 * Every failure (HTTP status, transport, broken stream, upstream error event)
 * becomes the run's one `Failed` event, so the stream never fails; it ends
 * right after its terminal event. The request lives in the stream's scope:
 * interrupting or ending the stream aborts it and closes the socket.
 */

export interface Options {
  /** The upstream's base URL, ending in `/v1` for most servers. */
  readonly baseUrl: string
  readonly upstreamModel: string
  readonly apiKey: Redacted.Redacted<string> | undefined
  readonly toolMode: "native" | "text"
  readonly headers?: Readonly<Record<string, string>>
}

/** How much of an error answer's body is read for its message. */
const MAX_ERROR_BODY_CHARS = 16 * 1024

export const make = (options: Options): Effect.Effect<Provider, never, HttpClient.HttpClient> =>
  Effect.map(HttpClient.HttpClient, (client) => {
    // withScope: the request is aborted when the scope of `Stream.unwrapScoped` closes.
    const scopedClient = HttpClient.withScope(client)
    const url = `${options.baseUrl.replace(/\/+$/, "")}/chat/completions`
    const apiKey = options.apiKey
    const initialState = Mapper.initial({ toolMode: options.toolMode, upstreamModel: options.upstreamModel })

    const httpRequest = (request: SubmitRunRequest) =>
      HttpClientRequest.post(url).pipe(
        HttpClientRequest.setHeaders({ accept: "text/event-stream", ...options.headers }),
        apiKey !== undefined ? HttpClientRequest.bearerToken(Redacted.value(apiKey)) : identity,
        HttpClientRequest.bodyUnsafeJson(
          toUpstreamBody(request, { upstreamModel: options.upstreamModel, toolMode: options.toolMode })
        )
      )

    const inputs = (request: SubmitRunRequest): Stream.Stream<Mapper.StreamInput> =>
      Stream.unwrapScoped(
        scopedClient.execute(httpRequest(request)).pipe(
          // An upstream may close an idle keep-alive connection just as it is reused; no byte of an answer
          // came back, so the request is sent once more on a fresh connection.
          Effect.retry({ times: 1, while: isStaleConnection }),
          Effect.flatMap((response) =>
            response.status >= 200 && response.status < 300
              ? Effect.succeed(bodyInputs(response))
              : Effect.map(errorStatusMessage(response), (message) => Stream.make(transportFailed(message)))
          ),
          Effect.catchAll((error) =>
            Effect.succeed(Stream.make(transportFailed(`upstream request failed: ${describeError(error)}`)))
          )
        )
      )

    // One stage folds a whole upstream read through the pure mapper: every stream stage costs per chunk, and a
    // paced upstream sends one event per chunk. The state is local to this run's stream.
    const run = (request: SubmitRunRequest): Stream.Stream<RunEvent.RunEvent> =>
      Stream.suspend(() => {
        let state = initialState
        const fold = (inputs: Chunk.Chunk<Mapper.StreamInput>): Chunk.Chunk<RunEvent.RunEvent> => {
          const out: Array<RunEvent.RunEvent> = []
          for (const input of inputs) {
            const [next, events] = Mapper.feed(state, input)
            state = next
            for (const e of events) out.push(e)
          }
          return Chunk.unsafeFromArray(out)
        }
        return inputs(request).pipe(Stream.mapChunks(fold))
      }).pipe(
        Stream.takeUntil(RunEvent.isTerminal),
        Stream.withSpan("OpenAiProvider.run", {
          attributes: { "iop.model": request.model, "iop.upstream_model": options.upstreamModel }
        })
      )

    return { run }
  })

/** A transport failure before any response: the pooled socket was closed by the other side. */
const isStaleConnection = (error: HttpClientError.HttpClientError): boolean =>
  error._tag === "RequestError" &&
  error.reason === "Transport" &&
  /other side closed|ECONNRESET|socket hang up|UND_ERR_SOCKET/i.test(describeError(error))

const transportFailed = (message: string): Mapper.StreamInput => ({ _tag: "TransportFailed", message })

// One SSE parser per response, created when the body stream starts.
const bodyInputs = (response: HttpClientResponse.HttpClientResponse): Stream.Stream<Mapper.StreamInput> =>
  Stream.suspend(() => {
    const decoder = makeUpstreamDecoder()
    const text = new TextDecoder()
    return response.stream.pipe(
      Stream.mapChunks((reads) => {
        const out: Array<Mapper.StreamInput> = []
        for (const bytes of reads) for (const input of decoder.feed(text.decode(bytes, { stream: true }))) out.push(input)
        return Chunk.unsafeFromArray(out)
      }),
      Stream.concat(Stream.make(Mapper.END)),
      Stream.catchAll((error) => Stream.make(transportFailed(`upstream stream broke: ${describeError(error)}`)))
    )
  })

const errorStatusMessage = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<string> =>
  response.stream.pipe(
    Stream.decodeText(),
    Stream.runFoldWhile("", (text) => text.length < MAX_ERROR_BODY_CHARS, (text, piece) => text + piece),
    Effect.orElseSucceed(() => ""),
    Effect.map((body) => `upstream answered HTTP ${response.status}: ${errorBodyMessage(body)}`)
  )

const causeText = (cause: unknown, depth = 0): string | undefined => {
  if (depth > 3 || cause === undefined || cause === null) return undefined
  if (!(cause instanceof Error)) return clip(String(cause), 300)
  const code = Predicate.hasProperty(cause, "code") && typeof cause.code === "string" ? cause.code : undefined
  const own = code !== undefined && !cause.message.includes(code) ? `${cause.message} (${code})` : cause.message
  // fetch-style errors ("fetch failed") keep the useful part in `cause`.
  const inner = causeText(cause.cause, depth + 1)
  return inner !== undefined && inner !== own ? `${own}: ${inner}` : own
}

const describeError = (error: HttpClientError.HttpClientError): string =>
  causeText(error.cause) ?? error.description ?? error.reason
