/** JSON Schema `pattern` and `patternProperties` evaluated by RE2 (re2js): linear in the input, never backtracking. */
import type { CodeOptions } from "ajv"
import { RE2JS } from "re2js"
import { clip, excerpt } from "../../common/clip.js"

/** ajv's `code.regExp` option (its type is not exported by name) and what it returns. */
export type RegExpEngine = NonNullable<CodeOptions["regExp"]>
type RegExpLike = ReturnType<RegExpEngine>

export type LinearPattern =
  | { readonly ok: true; readonly regExp: RegExpLike }
  | { readonly ok: false; readonly error: string }

// ajv shares one compiled pattern between the schemas of an instance by its toString.
const keyed = (key: string, test: (s: string) => boolean): RegExpLike => {
  const regExp = { test, toString: () => key }
  return regExp
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e))

// In a pattern that is valid with the `u` flag, `\k` can only start a named backreference.
const hasNamedBackreference = (pattern: string): boolean => {
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] !== "\\") continue
    if (pattern[i + 1] === "k") return true
    i++
  }
  return false
}

/**
 * A schema's pattern (ECMA-262, as ajv reads it: with the `u` flag) compiled for RE2. Patterns RE2 cannot run in
 * linear time (lookahead, lookbehind, backreferences) are errors, never handed to the backtracking engine.
 */
export const compileLinear = (pattern: string): LinearPattern => {
  try {
    // Constructing a RegExp only parses it (nothing is matched): it rejects what is not ECMA-262, which
    // translateRegExp would otherwise rewrite into something else (`\Z` into `Z`).
    new RegExp(pattern, "u")
  } catch (e) {
    return { ok: false, error: message(e) }
  }
  if (hasNamedBackreference(pattern)) return { ok: false, error: "backreferences are not supported" }
  try {
    const re = RE2JS.compile(RE2JS.translateRegExp(pattern))
    return { ok: true, regExp: keyed(`re2:${pattern}`, (s) => re.test(s)) }
  } catch (e) {
    return { ok: false, error: message(e) }
  }
}

export interface LinearRegExpEngine {
  /** For ajv's `code.regExp` option. */
  readonly engine: RegExpEngine
  /** The patterns rejected since the last call, each with its reason; empties the list. */
  readonly takeRejected: () => ReadonlyArray<string>
}

/** The name ajv sees for the engine; anything but "new RegExp" makes it call the function. */
export const ENGINE_CODE = "re2js"

/**
 * An engine for one set of ajv instances. ajv calls it while compiling a schema; a pattern RE2 rejects is recorded
 * (the compiled validator is then discarded by the caller) instead of thrown through ajv.
 */
export const makeLinearRegExpEngine = (): LinearRegExpEngine => {
  let rejected: Array<string> = []
  const compile = (pattern: string): RegExpLike => {
    const compiled = compileLinear(pattern)
    if (compiled.ok) return compiled.regExp
    rejected.push(
      `pattern ${excerpt(pattern, 64)} cannot be matched in linear time (RE2 syntax, no lookaround or ` +
        `backreferences): ${clip(compiled.error, 120)}`
    )
    return keyed(`rejected:${pattern}`, () => false)
  }
  return {
    engine: Object.assign(compile, { code: ENGINE_CODE }),
    takeRejected: () => {
      const out = rejected
      rejected = []
      return out
    }
  }
}
