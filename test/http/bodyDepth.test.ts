import { describe, expect, it } from "@effect/vitest"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { layerHttp } from "../../src/Edge.js"
import { MAX_BODY_DEPTH } from "../../src/dialects/jsonBody.js"
import { startFakeUpstream, textStream } from "../support/fakeUpstream.js"

/**
 * A body nested deeper than the documented 64 levels, anywhere, is a 400 naming where, in the API's error shape:
 * never a 500 (a 50,000-deep array used to overflow the stack of `JSON.stringify` in the tool-schema size check,
 * in count_tokens' estimate, in the Messages tool_use translation, or in the upstream request's serialisation).
 * The edge runs an OpenAI-compatible model (a fake upstream), so that every body is also serialised upstream.
 */

/** `n` nested arrays. */
const arrays = (n: number): string => "[".repeat(n) + "]".repeat(n)

type Api = "openai" | "anthropic"

interface Case {
  readonly route: string
  readonly api: Api
  /** Where the deep value is put. */
  readonly field: string
  /** The level the field's value takes (the body's root is level 1). */
  readonly level: number
  readonly body: (value: string) => string
}

const hi = `[{"role":"user","content":"hi"}]`

const cases: ReadonlyArray<Case> = [
  {
    route: "/v1/chat/completions",
    api: "openai",
    field: "messages[0].content[0].extra",
    level: 6,
    body: (v) => `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi","extra":${v}}]}]}`
  },
  {
    route: "/v1/chat/completions",
    api: "openai",
    field: "response_format.x",
    level: 3,
    body: (v) => `{"model":"m","messages":${hi},"response_format":{"type":"json_object","x":${v}}}`
  },
  {
    route: "/v1/chat/completions",
    api: "openai",
    field: "tools[0].function.parameters.x",
    level: 6,
    body: (v) =>
      `{"model":"m","messages":${hi},"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","x":${v}}}}]}`
  },
  {
    route: "/v1/responses",
    api: "openai",
    field: "input[0].content[0].extra",
    level: 6,
    body: (v) => `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi","extra":${v}}]}]}`
  },
  {
    route: "/v1/responses",
    api: "openai",
    field: "text.format.schema.x",
    level: 5,
    body: (v) => `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"s","schema":{"x":${v}}}}}`
  },
  {
    route: "/v1/responses",
    api: "openai",
    field: "tools[0].parameters.x",
    level: 5,
    body: (v) => `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","x":${v}}}]}`
  },
  {
    route: "/v1/messages",
    api: "anthropic",
    field: "messages[0].content[0].extra",
    level: 6,
    body: (v) => `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"hi","extra":${v}}]}]}`
  },
  {
    route: "/v1/messages",
    api: "anthropic",
    field: "tools[0].input_schema.x",
    level: 5,
    body: (v) => `{"model":"m","max_tokens":16,"messages":${hi},"tools":[{"name":"f","input_schema":{"type":"object","x":${v}}}]}`
  },
  {
    route: "/v1/messages",
    api: "anthropic",
    field: "messages[0].content[0].input.x",
    level: 7,
    body: (v) =>
      `{"model":"m","max_tokens":16,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"x":${v}}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`
  },
  {
    route: "/v1/messages/count_tokens",
    api: "anthropic",
    field: "tools[0].input_schema.x",
    level: 5,
    body: (v) => `{"model":"m","messages":${hi},"tools":[{"name":"f","input_schema":{"type":"object","x":${v}}}]}`
  },
  {
    route: "/v1/chat/completions",
    api: "openai",
    field: "unknown",
    level: 2,
    body: (v) => `{"model":"m","messages":${hi},"unknown":${v}}`
  }
]

/** The body with `stream` set (count_tokens has none). */
const withStream = (c: Case, value: string, stream: boolean): string => {
  const body = c.body(value)
  return c.route.endsWith("count_tokens") ? body : `{"stream":${stream},${body.slice(1)}`
}

/** The edge, its model `m` on a fake OpenAI upstream; its base URL. */
const edge = Effect.gen(function* () {
  const up = yield* Effect.acquireRelease(
    Effect.promise(() => startFakeUpstream({ kind: "sse", events: textStream(["ok"]) })),
    (u) => Effect.promise(u.close)
  )
  const config = Either.getOrThrow(
    decodeConfigJson("test", { models: [{ id: "m", provider: { type: "openai", baseUrl: up.url, apiKey: "sk-up" } }] })
  )
  const context = yield* Layer.build(
    layerHttp.pipe(
      Layer.provide(EdgeConfig.layer(config)),
      Layer.provide(NodeHttpClient.dispatcherLayer),
      Layer.provideMerge(NodeHttpServer.layerTest),
      // The edge sets its own log level per request: its lines are dropped here rather than filtered.
      Layer.provide(Logger.replace(Logger.defaultLogger, Logger.none))
    )
  )
  const address = (yield* Effect.provide(HttpServer.HttpServer, context)).address
  return `http://127.0.0.1:${address._tag === "TcpAddress" ? address.port : 0}`
})

const post = (url: string, body: string) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" },
      body
    })
    return { status: response.status, text: await response.text() }
  })

/** The error's message and param, in either API's shape, checked to be that shape. */
const errorOf = (api: Api, text: string) => {
  const body = JSON.parse(text)
  if (api === "anthropic") {
    expect(body).toMatchObject({ type: "error", error: { type: "invalid_request_error" } })
    return { message: String(body.error.message), param: undefined }
  }
  expect(body).toMatchObject({ error: { type: "invalid_request_error" } })
  return { message: String(body.error.message), param: body.error.param as string | null }
}

const TOO_DEEP = `nested deeper than ${MAX_BODY_DEPTH} levels`

describe("request bodies nested deeper than the limit", () => {
  it("the limit is 64 levels", () => {
    expect(MAX_BODY_DEPTH).toBe(64)
  })

  for (const stream of [false, true]) {
    it.scopedLive(`50,000 levels in any field of any API (stream: ${stream}): a 400 naming the field`, () =>
      Effect.gen(function* () {
        const url = yield* edge
        for (const c of cases) {
          const { status, text } = yield* post(url + c.route, withStream(c, arrays(50_000), stream))
          expect(status, `${c.route} ${c.field}: ${text.slice(0, 200)}`).toBe(400)
          const { message, param } = errorOf(c.api, text)
          expect(message.startsWith(`${c.field}[0]`), message).toBe(true)
          expect(message.endsWith(`: ${TOO_DEEP}`), message).toBe(true)
          expect(message.length).toBeLessThanOrEqual(300)
          expect(message).not.toContain("[[")
          if (param !== undefined) expect(message).toBe(`${param}: ${TOO_DEEP}`)
        }
      }), 60_000)

    it.scopedLive(`exactly 64 levels is accepted, 65 is not (stream: ${stream})`, () =>
      Effect.gen(function* () {
        const url = yield* edge
        for (const c of cases) {
          const atLimit = yield* post(url + c.route, withStream(c, arrays(MAX_BODY_DEPTH - c.level + 1), stream))
          expect(atLimit.status, `${c.route} ${c.field}: ${atLimit.text.slice(0, 300)}`).toBe(200)
          expect(atLimit.text).not.toContain(TOO_DEEP)
          const over = yield* post(url + c.route, withStream(c, arrays(MAX_BODY_DEPTH - c.level + 2), stream))
          expect(over.status).toBe(400)
          const { message } = errorOf(c.api, over.text)
          const path = c.field + "[0]".repeat(MAX_BODY_DEPTH - c.level + 1)
          expect(message.startsWith(path.length <= 120 ? `${path}: ` : c.field), message).toBe(true)
          expect(message).toContain(TOO_DEEP)
        }
      }), 60_000)
  }

  it.scopedLive("deep objects, `__proto__` keys and a body of 50,000 keys: a 400 or an answer, never a 500", () =>
    Effect.gen(function* () {
      const url = yield* edge
      const route = `${url}/v1/chat/completions`
      const deepObject = `{"model":"m","messages":${hi},"response_format":${'{"a":'.repeat(50_000)}1${"}".repeat(50_000)}}`
      const deep = yield* post(route, deepObject)
      expect(deep.status).toBe(400)
      expect(errorOf("openai", deep.text).param?.startsWith("response_format.a.a.a")).toBe(true)
      const proto = yield* post(route, `{"model":"m","messages":${hi},"__proto__":{"x":1},"response_format":{"__proto__":[1]}}`)
      expect(proto.status).toBe(200)
      const protoDeep = yield* post(route, `{"model":"m","messages":${hi},"__proto__":${arrays(50_000)}}`)
      expect(protoDeep.status).toBe(400)
      expect(errorOf("openai", protoDeep.text).param?.startsWith("__proto__[0]")).toBe(true)
      const keys = Array.from({ length: 50_000 }, (_, i) => `"k${i}":[1]`).join(",")
      const wide = yield* post(route, `{"model":"m","messages":${hi},"metadata":{${keys}}}`)
      expect(wide.status).toBe(400)
      expect(errorOf("openai", wide.text).param).toBe("metadata.k0")
    }), 60_000)
})
