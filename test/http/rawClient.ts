import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { createServer, type Server } from "node:http"
import { connect } from "node:net"
import * as EdgeConfig from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"
import { layerHttp } from "../../src/Edge.js"
import { layerNodeServer, layerNodeServerWith, nodeServerOptions } from "../../src/http/HttpLive.js"

/** What a raw socket client saw of one exchange. */
export interface RawExchange {
  /** Every byte received, as latin1 text. */
  readonly received: string
  /** The error of the request's write, if it failed (`EPIPE`, `ECONNRESET`). */
  readonly writeError: string | undefined
  /** An error while reading (`ECONNRESET`), if any. */
  readonly readError: string | undefined
  /** Whether the server ended the connection (FIN or reset) within the wait. */
  readonly closed: boolean
  /** Milliseconds from the connection to its end (or to the give-up). */
  readonly elapsedMs: number
  /** Whether the first response byte came before the request was all written (`readWhileWriting` only). */
  readonly answeredWhileWriting: boolean
}

/**
 * Connects, writes `request` (all of it, as a client that only reads once it
 * has written does), then reads until the server ends the connection or
 * `waitMs` passes.
 */
export const exchange = (
  port: number,
  request: Buffer | string,
  options: { readonly waitMs?: number; readonly readWhileWriting?: boolean } = {}
): Effect.Effect<RawExchange> =>
  Effect.async<RawExchange>((resume) => {
    const started = Date.now()
    const socket = connect({ host: "127.0.0.1", port })
    const chunks: Array<Buffer> = []
    let writeError: string | undefined
    let readError: string | undefined
    let done = false
    let written = false
    let answeredWhileWriting = false
    const finish = (closed: boolean) => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      resume(
        Effect.succeed({
          received: Buffer.concat(chunks).toString("latin1"),
          writeError,
          readError,
          closed,
          elapsedMs: Date.now() - started,
          answeredWhileWriting
        })
      )
    }
    const timer = setTimeout(() => finish(false), options.waitMs ?? 10_000)
    const read = () => {
      socket.on("data", (chunk: Buffer) => {
        if (chunks.length === 0 && !written) answeredWhileWriting = true
        chunks.push(chunk)
      })
      socket.on("end", () => finish(true))
      socket.on("close", () => finish(true))
    }
    socket.on("error", (e: NodeJS.ErrnoException) => {
      if (writeError === undefined) readError = e.code ?? e.message
    })
    if (options.readWhileWriting === true) read()
    socket.on("connect", () => {
      socket.write(request, (e) => {
        written = true
        if (e !== undefined && e !== null) writeError = (e as NodeJS.ErrnoException).code ?? e.message
        if (options.readWhileWriting !== true) read()
        if (socket.destroyed) finish(true)
      })
    })
    return Effect.sync(() => finish(false))
  })

/** The status line, lower-cased headers and body of a raw HTTP/1.1 response. */
export const parseResponse = (raw: string) => {
  const split = raw.indexOf("\r\n\r\n")
  const head = split === -1 ? raw : raw.slice(0, split)
  const [statusLine = "", ...lines] = head.split("\r\n")
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(":")
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  return { status: Number(statusLine.split(" ")[1]), headers, body: split === -1 ? "" : raw.slice(split + 4) }
}

/**
 * The edge on the production Node server (its timeouts and limits), on an ephemeral loopback port.
 * With `watch`, the Node server is made here and handed to it first (to watch its connections).
 */
export const edgeOnNodeServer = (server: Record<string, unknown> = {}, tokenDelayMs = 0, watch?: (node: Server) => void) => {
  const config = Either.getOrThrow(
    decodeConfigJson("test", { server: { port: 0, ...server }, models: [{ id: "echo", provider: { type: "echo", tokenDelayMs } }] })
  )
  const node = watch === undefined ? undefined : createServer(nodeServerOptions(config.server))
  if (node !== undefined) watch?.(node)
  return layerHttp.pipe(
    Layer.provideMerge(node === undefined ? layerNodeServer : layerNodeServerWith(config.server, node)),
    Layer.provide(EdgeConfig.layer(config)),
    Layer.provide(NodeHttpClient.dispatcherLayer)
  )
}

/** The port the server listens on. */
export const serverPort = HttpServer.HttpServer.pipe(
  Effect.flatMap((server) =>
    server.address._tag === "TcpAddress" ? Effect.succeed(server.address.port) : Effect.dieMessage("not a TCP server")
  )
)
