import * as PlatformError from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import { resolveApiKeys } from "../../src/config/apiKeys.js"
import type { EdgeConfigShape } from "../../src/config/EdgeConfig.js"
import { decodeConfigJson } from "../../src/config/loadConfig.js"

/** `server.apiKeysFile` / `server.apiKeysEnv`: a configured source that yields no key stops the edge (it must not start open). */

const configWith = (server: Record<string, unknown>): EdgeConfigShape => Either.getOrThrow(decodeConfigJson("test", { server }))

/** Resolves with the given files (path → text) and environment. */
const resolve = (config: EdgeConfigShape, files: Record<string, string> = {}, env: Record<string, string> = {}) =>
  resolveApiKeys(config).pipe(
    Effect.provide(
      FileSystem.layerNoop({
        readFileString: (path) =>
          path in files
            ? Effect.succeed(files[path] ?? "")
            : Effect.fail(
                new PlatformError.SystemError({ reason: "NotFound", module: "FileSystem", method: "readFileString", pathOrDescriptor: path })
              )
      })
    ),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))),
    Effect.either
  )

const keysOf = (config: EdgeConfigShape): Array<string> =>
  config.server.apiKeys.map((k) => Redacted.value(Redacted.isRedacted(k) ? k : k.key))

const failureOf = <A>(result: Either.Either<A, { readonly _tag: string; readonly message: string }>) => {
  if (Either.isRight(result)) throw new Error("expected the key source to be refused")
  expect(result.left._tag).toBe("ApiKeySourceError")
  // One line, a few hundred characters at most.
  expect(result.left.message).not.toContain("\n")
  expect(result.left.message.length).toBeLessThan(300)
  return result.left.message
}

describe("API key sources", () => {
  it.effect("apiKeysEnv set to an empty value stops start-up, naming the variable", () =>
    Effect.gen(function* () {
      const message = failureOf(yield* resolve(configWith({ apiKeysEnv: "IOP_KEYS" }), {}, { IOP_KEYS: "" }))
      expect(message).toContain("$.server.apiKeysEnv")
      expect(message).toContain("IOP_KEYS")
      expect(message).toMatch(/no (API )?key/i)
    })
  )

  it.effect.each([" , ", ",", " ", ",,,", " \t, ,\t"])("apiKeysEnv set to %j (separators and blanks only) stops start-up", (value) =>
    Effect.gen(function* () {
      const message = failureOf(yield* resolve(configWith({ apiKeysEnv: "IOP_KEYS" }), {}, { IOP_KEYS: value }))
      expect(message).toContain("IOP_KEYS")
      expect(message).toMatch(/no (API )?key/i)
    })
  )

  it.effect("apiKeysEnv naming a variable that is not set stops start-up", () =>
    Effect.gen(function* () {
      const message = failureOf(yield* resolve(configWith({ apiKeysEnv: "IOP_NOT_SET" })))
      expect(message).toContain("IOP_NOT_SET")
      expect(message).toMatch(/not set/)
    })
  )

  it.effect.each([
    ["empty", ""],
    ["blank lines", "\n\n   \n\t\n"],
    ["comments only", "# production keys\n# sk-commented-out\n"],
    ["comments and blank lines, CRLF", "\r\n# keys\r\n\r\n   # sk-indented-comment\r\n"]
  ] as const)("an apiKeysFile with no key (%s) stops start-up, naming the file and never a value", ([, text]) =>
    Effect.gen(function* () {
      const message = failureOf(yield* resolve(configWith({ apiKeysFile: "/etc/iop/keys" }), { "/etc/iop/keys": text }))
      expect(message).toContain("$.server.apiKeysFile")
      expect(message).toContain("/etc/iop/keys")
      expect(message).toMatch(/no (API )?key/i)
      expect(message).not.toContain("sk-")
    })
  )

  it.effect("an apiKeysFile that cannot be read stops start-up", () =>
    Effect.gen(function* () {
      const message = failureOf(yield* resolve(configWith({ apiKeysFile: "/missing/keys" })))
      expect(message).toContain("/missing/keys")
      expect(message).toMatch(/cannot read/)
    })
  )

  it.effect("each source must yield a key, even when server.apiKeys has some", () =>
    Effect.gen(function* () {
      const message = failureOf(
        yield* resolve(configWith({ apiKeys: ["sk-inline"], apiKeysEnv: "IOP_KEYS" }), {}, { IOP_KEYS: " , " })
      )
      expect(message).not.toContain("sk-inline")
    })
  )

  it.effect("keys from both sources are added to server.apiKeys; the resolved config names no source (resolving again changes nothing)", () =>
    Effect.gen(function* () {
      const config = configWith({ apiKeys: ["sk-inline"], apiKeysFile: "/keys", apiKeysEnv: "IOP_KEYS" })
      const resolved = Either.getOrThrow(
        yield* resolve(config, { "/keys": "# team\nsk-file-1\n\nsk-file-2\n" }, { IOP_KEYS: "sk-env-1, sk-env-2," })
      )
      expect(keysOf(resolved)).toEqual(["sk-inline", "sk-file-1", "sk-file-2", "sk-env-1", "sk-env-2"])
      expect(resolved.server.apiKeysFile).toBeUndefined()
      expect(resolved.server.apiKeysEnv).toBeUndefined()
      expect("apiKeysFile" in resolved.server || "apiKeysEnv" in resolved.server).toBe(false)
      // No file and no environment: a resolved config needs neither.
      const again = Either.getOrThrow(yield* resolve(resolved))
      expect(keysOf(again)).toEqual(keysOf(resolved))
    })
  )

  it.effect("no key source: the config is left as it is (no keys means no authentication, as configured)", () =>
    Effect.gen(function* () {
      const config = configWith({})
      expect(Either.getOrThrow(yield* resolve(config))).toBe(config)
    })
  )
})
