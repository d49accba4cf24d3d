import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { IncomingMessage } from "node:http"

/**
 * The Node request behind an `HttpServerRequest` served by `NodeHttpServer` (whose `source` it is, as
 * `NodeHttpServerRequest.toIncomingMessage` returns it); `undefined` behind `HttpApp.toWebHandler` and other
 * servers, whose `source` is a web `Request`, and there is no connection of the edge's to manage.
 */
export const nodeSource = (request: HttpServerRequest.HttpServerRequest): IncomingMessage | undefined =>
  request.source instanceof IncomingMessage ? request.source : undefined
