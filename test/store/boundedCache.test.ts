import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { BoundedCache } from "../../src/store/boundedCache.js"

/** The response store's bounded cache: least recently used out first, by count and by size; a TTL from each set. */

const limits = { maxEntries: 3, maxBytes: 100, ttlMs: 1000 }

describe("BoundedCache", () => {
  it("keeps at most maxEntries: the least recently used (set or read) goes first", () => {
    const c = new BoundedCache(limits)
    c.set("a", "1", 0)
    c.set("b", "2", 0)
    c.set("c", "3", 0)
    expect(c.get("a", 0)).toBe("1")
    c.set("d", "4", 0)
    expect([c.get("a", 0), c.get("b", 0), c.get("c", 0), c.get("d", 0)]).toEqual(["1", undefined, "3", "4"])
    expect(c.size).toBe(3)
  })

  it("keeps at most maxBytes of text: older entries go until the new one fits; one larger than the limit is refused", () => {
    const c = new BoundedCache(limits)
    c.set("a", "x".repeat(40), 0)
    c.set("b", "y".repeat(40), 0)
    c.set("c", "z".repeat(30), 0)
    expect(c.get("a", 0)).toBeUndefined()
    expect(c.bytes).toBe(70)
    expect(c.set("big", "w".repeat(101), 0)).toBe(false)
    expect(c.get("big", 0)).toBeUndefined()
    expect(c.bytes).toBe(70)
    // Replacing a key counts its new text only.
    c.set("b", "v", 0)
    expect(c.bytes).toBe(31)
  })

  it("an entry lives ttlMs from when it was set: reading does not extend it; an expired one is gone", () => {
    const c = new BoundedCache(limits)
    c.set("a", "1", 1000)
    expect(c.get("a", 1999)).toBe("1")
    expect(c.get("a", 2000)).toBeUndefined()
    expect(c.size).toBe(0)
    expect(c.bytes).toBe(0)
    c.set("a", "2", 2000)
    expect(c.get("a", 2500)).toBe("2")
  })

  it("delete forgets a key and says whether it was there", () => {
    const c = new BoundedCache(limits)
    c.set("a", "abc", 0)
    expect(c.delete("a")).toBe(true)
    expect(c.delete("a")).toBe(false)
    expect(c.bytes).toBe(0)
  })

  type Op = { readonly op: "set"; readonly key: string; readonly value: string } | { readonly op: "get" | "delete"; readonly key: string }
  const op: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ op: fc.constant("set" as const), key: fc.constantFrom("a", "b", "c", "d", "e"), value: fc.string({ maxLength: 60 }) }),
    fc.record({ op: fc.constantFrom("get" as const, "delete" as const), key: fc.constantFrom("a", "b", "c", "d", "e") })
  )

  it.prop("agrees with a plain LRU model and never passes its limits", [fc.array(op, { maxLength: 60 })], ([ops]) => {
    const c = new BoundedCache({ maxEntries: 3, maxBytes: 80, ttlMs: 1_000_000 })
    // The model: keys in use order (least recent first), with their texts.
    let model: Array<[string, string]> = []
    for (const o of ops) {
      if (o.op === "set") {
        model = model.filter(([k]) => k !== o.key)
        const kept = c.set(o.key, o.value, 0)
        expect(kept).toBe(o.value.length <= 80)
        if (kept) {
          model.push([o.key, o.value])
          while (model.length > 3 || model.reduce((n, [, v]) => n + v.length, 0) > 80) model.shift()
        }
      } else if (o.op === "get") {
        const found = model.find(([k]) => k === o.key)
        expect(c.get(o.key, 0)).toBe(found?.[1])
        if (found !== undefined) model = [...model.filter(([k]) => k !== o.key), found]
      } else {
        expect(c.delete(o.key)).toBe(model.some(([k]) => k === o.key))
        model = model.filter(([k]) => k !== o.key)
      }
      expect(c.size).toBe(model.length)
      expect(c.bytes).toBe(model.reduce((n, [, v]) => n + v.length, 0))
      expect(c.size).toBeLessThanOrEqual(3)
      expect(c.bytes).toBeLessThanOrEqual(80)
    }
  })
})
