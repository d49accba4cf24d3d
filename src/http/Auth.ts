import * as Redacted from "effect/Redacted"
import { createHash, timingSafeEqual } from "node:crypto"
import type { ApiKeyEntry } from "../config/EdgeConfig.js"
import type { KeyCheck, KeyPolicy } from "../chat/KeyPolicy.js"

export { allows, grantedKey, type KeyCheck, type KeyPolicy } from "../chat/KeyPolicy.js"

const digest = (s: string): Buffer => createHash("sha256").update(s).digest()

export const policyOf = (entry: ApiKeyEntry, index: number): KeyPolicy =>
  Redacted.isRedacted(entry)
    ? { id: `key-${index + 1}`, models: undefined, maxConcurrentRuns: undefined }
    : { id: entry.name ?? `key-${index + 1}`, models: entry.models, maxConcurrentRuns: entry.maxConcurrentRuns }

/** The key a request presents: `Authorization: Bearer <key>`, or else Anthropic's `x-api-key: <key>`. */
export const presentedKey = (headers: Readonly<Record<string, string | undefined>>): string | undefined => {
  const authorization = headers["authorization"]
  if (authorization !== undefined && authorization.trim() !== "") return authorization
  const apiKey = headers["x-api-key"]?.trim()
  return apiKey === undefined || apiKey === "" ? undefined : `Bearer ${apiKey}`
}

/**
 * Checks an `Authorization` header (see `presentedKey`) against the configured keys. Every key is
 * compared, as SHA-256 digests in constant time, so neither a key's content,
 * its length nor its position leaks through timing. No keys: everything passes.
 */
export const makeKeyCheck = (entries: ReadonlyArray<ApiKeyEntry>) => {
  const keys = entries.map((entry, i) => ({
    digest: digest(Redacted.value(Redacted.isRedacted(entry) ? entry : entry.key)),
    policy: policyOf(entry, i)
  }))
  return (authorization: string | undefined): KeyCheck => {
    if (keys.length === 0) return { _tag: "Open" }
    const match = authorization === undefined ? null : /^Bearer\s+(.+)$/i.exec(authorization.trim())
    const presented = digest(match?.[1] ?? "")
    let granted: KeyPolicy | undefined
    for (const k of keys) if (timingSafeEqual(k.digest, presented) && granted === undefined) granted = k.policy
    if (match === null) return { _tag: "Denied", reason: "missing" }
    return granted !== undefined ? { _tag: "Granted", key: granted } : { _tag: "Denied", reason: "incorrect" }
  }
}
