import * as HttpApp from "@effect/platform/HttpApp"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { ChatCompletions } from "iop-edge"
import { createServer } from "node:http"
import OpenAI from "openai"
import { app, AppLive, EdgeServices } from "../src/app.js"

const Served = AppLive.pipe(Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })))
const baseUrl = Effect.map(HttpServer.HttpServer, (s) => (s.address._tag === "TcpAddress" ? `http://127.0.0.1:${s.address.port}` : ""))

/** Every error the typed API can fail with, matched by tag: adding one to the union breaks this at compile time. */
const explain = (e: ChatCompletions.ResponseError | ChatCompletions.RequestError): string => {
  switch (e._tag) {
    case "RateLimited":
    case "NoNodeForModel":
    case "NodesAtCapacity":
    case "NodeUnavailable":
    case "RunRequestTooLarge":
    case "ModelNotFound":
    case "InvalidRequest":
      return `not started: ${e.message}`
    case "RunFailed":
    case "RunTimedOut":
    case "ToolValidationFailed":
    case "ToolValidationRetryFailed":
    case "UpstreamRejected":
      return `failed: ${e.message}`
  }
}

describe("the example app", () => {
  it.scopedLive("serves its own route and the edge's beside it, under its middleware; our provider answers over HTTP", () =>
    Effect.gen(function* () {
      const url = yield* baseUrl
      const hello = yield* Effect.promise(() => fetch(`${url}/hello`))
      expect(yield* Effect.promise(() => hello.text())).toBe("hello from the app")
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 })
      const answer = yield* Effect.promise(() =>
        client.chat.completions.create({ model: "loud", messages: [{ role: "user", content: "hello there" }] })
      )
      expect(answer.choices[0]?.message.content).toBe("HELLO THERE")
      const stream = yield* Effect.promise(() =>
        client.chat.completions.create({ model: "shout", stream: true, messages: [{ role: "user", content: "a b c" }] })
      )
      let text = ""
      yield* Effect.promise(async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
      })
      expect(text).toBe("A B C")
      const raw = yield* Effect.promise(() => fetch(`${url}/v1/models`))
      expect(raw.headers.get("x-powered-by")).toBe("example-app")
      expect(((yield* Effect.promise(() => raw.json())) as { data: Array<{ id: string }> }).data.map((m) => m.id)).toEqual(["shout", "loud"])
    }).pipe(Effect.provide(Served)))

  it.scoped("runs behind HttpApp.toWebHandler too", () =>
    Effect.gen(function* () {
      const handler = HttpApp.toWebHandlerRuntime(yield* Effect.runtime<Layer.Layer.Success<typeof EdgeServices>>())(yield* app)
      const response = yield* Effect.promise(() =>
        handler(new Request("http://localhost/v1/chat/completions", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "shout", stream: true, messages: [{ role: "user", content: "web handler" }] })
        }))
      )
      const body = yield* Effect.promise(() => response.text())
      expect(body).toContain('"content":"WEB HANDLER"')
      expect(body.trimEnd().endsWith("data: [DONE]")).toBe(true)
    }).pipe(Effect.provide(EdgeServices)))

  it.scoped("the typed API: create and stream, errors matched exhaustively", () =>
    Effect.gen(function* () {
      const request = yield* ChatCompletions.request({ model: "shout", messages: [{ role: "user", content: "typed call" }] })
      const completion = yield* ChatCompletions.create(request)
      expect(completion.choices[0]?.message.content).toBe("TYPED CALL")
      const chunks = yield* Stream.runCollect(ChatCompletions.stream(request))
      expect(Array.from(chunks, (c) => c.choices[0]?.delta.content ?? "").join("")).toBe("TYPED CALL")
      const missing = yield* ChatCompletions.request({ model: "nope", messages: [{ role: "user", content: "x" }] }).pipe(
        Effect.flatMap(ChatCompletions.create),
        Effect.match({ onFailure: explain, onSuccess: () => "answered" })
      )
      expect(missing).toBe('not started: The model "nope" does not exist')
    }).pipe(Effect.provide(EdgeServices)))
})
