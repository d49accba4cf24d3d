import * as Arr from "effect/Array"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as AST from "effect/SchemaAST"
import { clip } from "./clip.js"

/**
 * Schema decode errors as one short line per problem, each naming the JSON
 * path and what was expected, for request bodies and config files alike.
 * What was expected is said in words ("object", "array"), never as the
 * schema's type (which can run to kilobytes); the offending value is never
 * quoted back in requests, and only when it is a short scalar in config files.
 */

/** Path segments, and the path and the message of an issue, are clipped to these (a line stays under 300). */
const MAX_KEY = 40
const MAX_PATH = 120
const MAX_MESSAGE = 170
const MAX_EXPECTED = 120
const MAX_QUOTED = 40

/** `models[0].provider.baseUrl` (with root "$": `$.models[0]...`); a long key is clipped. */
export const jsonPath = (path: ReadonlyArray<PropertyKey>, root = ""): string =>
  clip(
    path.reduce<string>((acc, key) => {
      if (typeof key === "number") return `${acc}[${key}]`
      const name = String(key)
      if (name.length > MAX_KEY) return `${acc}[${JSON.stringify(clip(name, MAX_KEY, "ellipsis"))}]`
      if (!/^[A-Za-z_$][\w$]*$/.test(name)) return `${acc}[${JSON.stringify(name)}]`
      return acc === "" ? name : `${acc}.${name}`
    }, root),
    MAX_PATH,
    "ellipsis"
  )

/** How the offending value appears: `hide` (requests: its kind only) or `short` (config files: short scalars quoted). */
export type ValuePolicy = "hide" | "short"

const kindOf = (u: unknown): string => (u === null ? "null" : Array.isArray(u) ? "array" : typeof u)

const describeValue = (u: unknown, values: ValuePolicy): string => {
  if (values === "short") {
    if (typeof u === "string") return u.length <= MAX_QUOTED ? JSON.stringify(u) : `string of ${u.length} characters`
    if (typeof u === "number" || typeof u === "boolean" || u === null) return clip(String(u), MAX_QUOTED, "ellipsis")
  }
  return kindOf(u)
}

const annotation = (ast: AST.Annotated): Option.Option<string> =>
  AST.getDescriptionAnnotation(ast).pipe(
    Option.orElse(() => AST.getTitleAnnotation(ast)),
    Option.orElse(() => AST.getIdentifierAnnotation(ast))
  )

const isMany = (
  issues: ParseResult.SingleOrNonEmpty<ParseResult.ParseIssue>
): issues is Arr.NonEmptyReadonlyArray<ParseResult.ParseIssue> => Array.isArray(issues)

/** What a schema accepts, in a few words: structures by their kind, unions member by member. */
const expected = (ast: AST.AST, depth = 0): ReadonlyArray<string> => {
  if (depth > 8) return ["value"]
  switch (ast._tag) {
    case "Literal":
      return [clip(typeof ast.literal === "bigint" ? `${ast.literal}n` : JSON.stringify(ast.literal), MAX_QUOTED, "ellipsis")]
    case "Union":
      return Arr.dedupe(ast.types.flatMap((t) => expected(t, depth + 1)))
    case "TypeLiteral":
      return ["object"]
    case "TupleType":
      return ["array"]
    case "Refinement":
      return Option.match(annotation(ast), { onNone: () => expected(ast.from, depth + 1), onSome: (a) => [a] })
    case "Transformation":
      return expected(ast.from, depth + 1)
    case "Suspend":
      return expected(ast.f(), depth + 1)
    case "Declaration":
      return [Option.getOrElse(annotation(ast), () => "value")]
    default:
      return [clip(String(ast), MAX_QUOTED, "ellipsis")]
  }
}

/**
 * The issue with every default "Expected <type>, actual <value>" message
 * replaced by a short one. Messages from annotations are left to Schema
 * (they take precedence over a Type's message), and clipped afterwards.
 */
const shorten = (issue: ParseResult.ParseIssue, values: ValuePolicy): ParseResult.ParseIssue => {
  switch (issue._tag) {
    case "Type":
      return new ParseResult.Type(
        issue.ast,
        issue.actual,
        issue.message !== undefined
          ? clip(issue.message, MAX_MESSAGE, "ellipsis")
          : `Expected ${clip(expected(issue.ast).join(" | "), MAX_EXPECTED, "ellipsis")}, actual ${describeValue(issue.actual, values)}`
      )
    case "Pointer":
      return new ParseResult.Pointer(issue.path, issue.actual, shorten(issue.issue, values))
    case "Composite":
      return new ParseResult.Composite(
        issue.ast,
        issue.actual,
        isMany(issue.issues)
          ? Arr.map(issue.issues, (i) => shorten(i, values))
          : shorten(issue.issues, values),
        issue.output
      )
    case "Refinement":
      return new ParseResult.Refinement(issue.ast, issue.actual, issue.kind, shorten(issue.issue, values))
    case "Transformation":
      return new ParseResult.Transformation(issue.ast, issue.actual, issue.kind, shorten(issue.issue, values))
    case "Missing":
    case "Unexpected":
    case "Forbidden":
      return issue
  }
}

const describeIssue = (issue: ParseResult.ArrayFormatterIssue): string => {
  switch (issue._tag) {
    case "Unexpected":
      return "unknown key (not allowed here)"
    case "Missing":
      return "missing (required)"
    default:
      return clip(issue.message, MAX_MESSAGE, "ellipsis")
  }
}

export interface Issue {
  readonly path: string
  readonly message: string
}

/**
 * The most specific problem of a decode error: the deepest path, with the
 * alternatives of a union at that path merged into one "Expected a | b".
 * `path` is at most 120 characters and `message` at most 170, so that
 * `${path}: ${message}` fits in 300; `values` says whether short offending
 * values may be quoted (default: never).
 */
export const primaryIssue = (error: ParseResult.ParseError, root = "", values: ValuePolicy = "hide"): Issue | undefined => {
  const all = ParseResult.ArrayFormatter.formatIssueSync(shorten(error.issue, values))
  const deepest = all.reduce<ParseResult.ArrayFormatterIssue | undefined>(
    (best, i) => (best === undefined || i.path.length > best.path.length ? i : best),
    undefined
  )
  if (deepest === undefined) return undefined
  const key = JSON.stringify(deepest.path.map(String))
  const same = all.filter((i) => JSON.stringify(i.path.map(String)) === key)
  const parsed = same.map((i) => (i._tag === "Type" ? /^Expected (.*), actual (.*)$/s.exec(i.message) : null))
  const path = jsonPath(deepest.path, root)
  if (same.length > 1 && parsed.every((m) => m !== null)) {
    const expectedAll = Arr.dedupe(parsed.flatMap((m) => (m?.[1] ?? "").split(" | "))).filter((e) => e !== "undefined")
    return {
      path,
      message: clip(`Expected ${clip(expectedAll.join(" | "), MAX_EXPECTED, "ellipsis")}, actual ${parsed[0]?.[2] ?? ""}`, MAX_MESSAGE, "ellipsis")
    }
  }
  return { path, message: describeIssue(deepest) }
}
