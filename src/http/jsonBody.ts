import * as Either from "effect/Either"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { depthExceededAt } from "../common/jsonDepth.js"
import { jsonPath, primaryIssue } from "../config/parseIssues.js"
import { InvalidRequest } from "./errors.js"

/**
 * A request body, from its text to its API's wire type, the same way for every API: parsed, its nesting depth
 * checked, then decoded by Schema. Every error is a 400 naming the field in a few hundred characters; none
 * quotes the body.
 */

/**
 * The deepest a request body may nest, in arrays and objects counted from the body's root (`{}` is one level).
 * A tool's JSON Schema sits 4–5 levels down and takes about two levels per nested object property, so this
 * leaves room for about 30 nested properties; the code after decoding (`JSON.stringify`, ajv, Schema) recurses
 * well within it.
 */
export const MAX_BODY_DEPTH = 64

/** The body's JSON value, or a 400: not JSON, or nested deeper than `MAX_BODY_DEPTH` (naming where). */
export const parseBody = (text: string): Either.Either<unknown, InvalidRequest> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    // The parser's message quotes the body: not repeated.
    return Either.left(new InvalidRequest({ message: "request body is not valid JSON", param: null }))
  }
  // Before anything that recurses over the value (Schema, ajv, `JSON.stringify`): a stack overflow there is a 500.
  const at = depthExceededAt(json, MAX_BODY_DEPTH)
  if (at === undefined) return Either.right(json)
  const param = at.length === 0 ? null : jsonPath(at)
  const where = param === null ? "request body" : param
  return Either.left(new InvalidRequest({ message: `${where}: nested deeper than ${MAX_BODY_DEPTH} levels`, param }))
}

/** A decode error under `root` (`input[3]`), as a 400 naming the deepest offending field, never quoting its value. */
export const issueOf = (error: ParseResult.ParseError, root = ""): InvalidRequest => {
  const first = primaryIssue(error, root)
  const param = first === undefined || first.path === "" ? (root === "" ? null : root) : first.path
  const message = first === undefined ? "invalid request" : param === null ? first.message : `${param}: ${first.message}`
  return new InvalidRequest({ message, param })
}

/** A decoder of an already parsed value (a body, or a part of one under `root`) into `schema`'s type. */
export const decodeValue = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "all" })
  return (value: unknown, root = ""): Either.Either<A, InvalidRequest> =>
    Either.mapLeft(decode(value), (e) => issueOf(e, root))
}

/** A body's decoder: `parseBody`, then `schema`. */
export const decodeJsonBody = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = decodeValue(schema)
  return (text: string): Either.Either<A, InvalidRequest> => Either.flatMap(parseBody(text), (json) => decode(json))
}
