import * as Either from "effect/Either"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { depthExceededAt, type JsonPath } from "../common/jsonDepth.js"
import { jsonPath, primaryIssue } from "../common/parseIssues.js"
import { InvalidRequest } from "../chat/EdgeError.js"

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
  return withinDepth(json)
}

/**
 * A request's value as it is, or a 400 naming where it nests deeper than `MAX_BODY_DEPTH`: checked before anything
 * recurses over it (Schema, ajv, `JSON.stringify`), where a stack overflow would be a 500. Bodies and requests
 * built in code (the typed API) alike.
 */
export const withinDepth = <A>(value: A): Either.Either<A, InvalidRequest> => {
  const at = depthExceededAt(value, MAX_BODY_DEPTH)
  if (at === undefined) return Either.right(value)
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

/** Keys that, as an object's own (JSON can give any), make `String(object)` throw instead of converting it. */
const CONVERSION_KEYS = ["toString", "valueOf"]

/** Where the first object that cannot be converted to a string is: one with its own `toString` or `valueOf`. */
export const unconvertibleAt = (value: unknown): JsonPath | undefined => {
  const stack: Array<{ readonly value: unknown; readonly path: JsonPath }> = [{ value, path: [] }]
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const v = next.value
    if (typeof v !== "object" || v === null) continue
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], path: [...next.path, i] })
      continue
    }
    if (CONVERSION_KEYS.some((k) => Object.hasOwn(v, k))) return next.path
    const entries = Object.entries(v)
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, child] = entries[i]!
      stack.push({ value: child, path: [...next.path, key] })
    }
  }
  return undefined
}

/** A decoder of an already parsed value (a body, or a part of one under `root`) into `schema`'s type. */
export const decodeValue = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "all" })
  return (value: unknown, root = ""): Either.Either<A, InvalidRequest> => {
    try {
      return Either.mapLeft(decode(value), (e) => issueOf(e, root))
    } catch {
      // Schema converts a union's tag with `String(value)`, which throws for an object of the body with its own
      // `toString` (`{"type": {"toString": 0}}`): a 400 naming that field, never a 500.
      const at = unconvertibleAt(value)
      const where = at === undefined ? root : jsonPath(at, root)
      return Either.left(new InvalidRequest({
        message: `${where === "" ? "request body" : where}: an object where a plain value was expected`,
        param: where === "" ? null : where
      }))
    }
  }
}

/** A body's decoder: `parseBody`, then `schema`. */
export const decodeJsonBody = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = decodeValue(schema)
  return (text: string): Either.Either<A, InvalidRequest> => Either.flatMap(parseBody(text), (json) => decode(json))
}
