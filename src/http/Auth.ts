import * as Redacted from "effect/Redacted"
import { createHash, timingSafeEqual } from "node:crypto"
import type { ApiKeyEntry } from "../config/EdgeConfig.js"

/** What a matched key may do; `id` names it in logs and limits (never the key itself). */
export interface KeyPolicy {
  readonly id: string
  readonly models: ReadonlyArray<string> | undefined
  readonly maxConcurrentRuns: number | undefined
}

export type KeyCheck =
  | { readonly _tag: "Open" }
  | { readonly _tag: "Granted"; readonly key: KeyPolicy }
  /** `missing`: no bearer key was presented at all; `incorrect`: one was, and it matches no key. */
  | { readonly _tag: "Denied"; readonly reason: "missing" | "incorrect" }

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

/** Whether a key may use a model, named by its id or by the alias the caller used. */
export const allows = (check: KeyCheck, model: string, alias?: string): boolean =>
  check._tag !== "Granted" || check.key.models === undefined || check.key.models.includes(model) ||
  (alias !== undefined && check.key.models.includes(alias))
