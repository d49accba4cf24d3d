/**
 * A bounded cache of sized values, texts or bytes (PURE: time is given): at most `maxEntries` entries and
 * `maxBytes` of values (a value's `length`), the least recently used dropped first when either is passed; each
 * entry lives `ttlMs` from when it was set (reading it does not extend it). A `Map` keeps the use order: a read
 * moves its entry to the end.
 */

export interface CacheLimits {
  readonly maxEntries: number
  readonly maxBytes: number
  readonly ttlMs: number
}

/** What the cache holds: its `length` is what `maxBytes` bounds. */
export interface Sized {
  readonly length: number
}

interface Entry<V extends Sized> {
  readonly value: V
  readonly expiresAt: number
}

export class BoundedCache<V extends Sized = string> {
  private readonly entries = new Map<string, Entry<V>>()
  private used = 0

  constructor(readonly limits: CacheLimits) {}

  /** Entries held (expired ones included until they are read or pushed out). */
  get size(): number {
    return this.entries.size
  }

  /** The length of the values held. */
  get bytes(): number {
    return this.used
  }

  /** The value under `key` if it is there and alive at `now` (it becomes the most recently used). */
  get(key: string, now: number): V | undefined {
    const entry = this.entries.get(key)
    if (entry === undefined) return undefined
    this.entries.delete(key)
    if (entry.expiresAt <= now) {
      this.used -= entry.value.length
      return undefined
    }
    this.entries.set(key, entry)
    return entry.value
  }

  /** Sets `key` (the most recently used), dropping the least recently used past the limits; false: too large to keep. */
  set(key: string, value: V, now: number): boolean {
    this.delete(key)
    if (value.length > this.limits.maxBytes) return false
    this.entries.set(key, { value, expiresAt: now + this.limits.ttlMs })
    this.used += value.length
    for (const [oldest, entry] of this.entries) {
      if (this.entries.size <= this.limits.maxEntries && this.used <= this.limits.maxBytes) break
      this.entries.delete(oldest)
      this.used -= entry.value.length
    }
    return true
  }

  /** Forgets `key`; whether it was there. */
  delete(key: string): boolean {
    const entry = this.entries.get(key)
    if (entry === undefined) return false
    this.entries.delete(key)
    this.used -= entry.value.length
    return true
  }
}
