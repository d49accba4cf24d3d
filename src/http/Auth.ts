import * as Redacted from "effect/Redacted"
import { createHash, timingSafeEqual } from "node:crypto"

const digest = (s: string): Buffer => createHash("sha256").update(s).digest()

/**
 * Checks an `Authorization` header against the configured keys. Keys are
 * compared as SHA-256 digests in constant time, so neither their content nor
 * their length leaks through timing. No keys configured: everything passes.
 */
export const makeKeyCheck = (keys: ReadonlyArray<Redacted.Redacted<string>>) => {
  const digests = keys.map((k) => digest(Redacted.value(k)))
  return (authorization: string | undefined): boolean => {
    if (digests.length === 0) return true
    const match = authorization === undefined ? null : /^Bearer\s+(.+)$/i.exec(authorization.trim())
    const presented = digest(match?.[1] ?? "")
    let ok = false
    for (const d of digests) ok = timingSafeEqual(d, presented) || ok
    return ok && match !== null
  }
}
