import * as ParseResult from "effect/ParseResult"

/** Schema decode errors as one line per problem, each naming the JSON path and what was expected. */

/** `models[0].provider.baseUrl` (with root "$": `$.models[0]...`). */
export const jsonPath = (path: ReadonlyArray<PropertyKey>, root = ""): string =>
  path.reduce<string>((acc, key) => {
    if (typeof key === "number") return `${acc}[${key}]`
    const name = String(key)
    if (!/^[A-Za-z_$][\w$]*$/.test(name)) return `${acc}[${JSON.stringify(name)}]`
    return acc === "" ? name : `${acc}.${name}`
  }, root)

const describeIssue = (issue: ParseResult.ArrayFormatterIssue): string => {
  switch (issue._tag) {
    case "Unexpected":
      return "unknown key (not allowed here)"
    case "Missing":
      return "missing (required)"
    default:
      return issue.message
  }
}

export interface Issue {
  readonly path: string
  readonly message: string
}

/**
 * The most specific problem of a decode error: the deepest path, with the
 * alternatives of a union at that path merged into one "Expected a | b".
 */
export const primaryIssue = (error: ParseResult.ParseError, root = ""): Issue | undefined => {
  const all = ParseResult.ArrayFormatter.formatErrorSync(error)
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
    const expected = [...new Set(parsed.map((m) => m?.[1] ?? ""))].filter((e) => e !== "undefined")
    return { path, message: `Expected ${expected.join(" | ")}, actual ${parsed[0]?.[2] ?? ""}` }
  }
  return { path, message: describeIssue(deepest) }
}
