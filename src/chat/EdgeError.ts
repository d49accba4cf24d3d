import * as Schema from "effect/Schema"
import { clip } from "../common/clip.js"
import type { SubmitError } from "../protocol/errors.js"
import type { ResponseStoreError } from "../store/ResponseStore.js"
import type { ModelNotFound, RunOutcomeError } from "./errors.js"

/** The edge's errors: the request's (the HTTP plane's, before it reaches the chat plane) and, below, the union every API answers. */

/** `code`: OpenAI's, where clients act on one (`previous_response_not_found`). */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  message: Schema.String,
  param: Schema.NullOr(Schema.String),
  code: Schema.optional(Schema.String)
}) {}

/** `reason` is the key check's (`Auth.ts`); without it the message fits both cases. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  reason: Schema.optional(Schema.Literal("missing", "incorrect"))
}) {
  override get message(): string {
    switch (this.reason) {
      case "missing":
        return "Missing API key: pass it as 'Authorization: Bearer <key>'"
      case "incorrect":
        return "Incorrect API key provided"
      case undefined:
        return "Missing or incorrect API key: pass one as 'Authorization: Bearer <key>'"
    }
  }
}

export class BodyTooLarge extends Schema.TaggedError<BodyTooLarge>()("BodyTooLarge", { limit: Schema.Number }) {
  override get message(): string {
    return `request body is larger than the limit of ${this.limit} bytes`
  }
}

export class ShuttingDown extends Schema.TaggedError<ShuttingDown>()("ShuttingDown", {}) {
  override get message(): string {
    return "the edge is shutting down"
  }
}

export class RouteNotFound extends Schema.TaggedError<RouteNotFound>()("RouteNotFound", {
  method: Schema.String,
  path: Schema.String
}) {
  override get message(): string {
    return `no route for ${this.method} ${this.path}`
  }
}

/** `GET`/`DELETE /v1/responses/{id}`: a response that is not stored (never was, expired, deleted, or another key's). */
export class ResponseNotFound extends Schema.TaggedError<ResponseNotFound>()("ResponseNotFound", { id: Schema.String }) {
  override get message(): string {
    return `Response with id '${clip(this.id, 100)}' not found.`
  }
}

/** A concurrency limit is reached (the edge's, or the caller's key's). */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  scope: Schema.Literal("edge", "key"),
  limit: Schema.Number
}) {
  override get message(): string {
    return this.scope === "key"
      ? `too many concurrent requests for this API key (limit ${this.limit}); retry shortly`
      : `the edge is serving its limit of ${this.limit} concurrent requests; retry shortly`
  }
}

/** A value the caller sent, quoted back in a message, is clipped to this: never more than a short prefix of it. */
const MAX_QUOTED = 100

/** A `Host` outside the names a loopback-bound edge answers to (DNS rebinding). */
export class HostNotAllowed extends Schema.TaggedError<HostNotAllowed>()("HostNotAllowed", { host: Schema.String }) {
  override get message(): string {
    return `host '${clip(this.host, MAX_QUOTED)}' is not allowed: add it to server.allowedHosts`
  }
}

/** A cross-origin browser request from an origin not in `server.cors.allowedOrigins`. */
export class OriginNotAllowed extends Schema.TaggedError<OriginNotAllowed>()("OriginNotAllowed", {
  origin: Schema.String
}) {
  override get message(): string {
    return `origin '${clip(this.origin, MAX_QUOTED)}' is not allowed: add it to server.cors.allowedOrigins`
  }
}

/** A defect (a bug) while handling a request: answered as a 500 that says nothing of it. */
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {}) {
  override get message(): string {
    return "internal error"
  }
}

export type HttpError =
  | InternalError
  | InvalidRequest
  | ResponseNotFound
  | ResponseStoreError
  | Unauthorized
  | BodyTooLarge
  | ShuttingDown
  | RouteNotFound
  | RateLimited
  | HostNotAllowed
  | OriginNotAllowed

/** Every error an API answers with, before or instead of a response (each dialect renders it in its shape). */
export type EdgeError = HttpError | ModelNotFound | SubmitError | RunOutcomeError
