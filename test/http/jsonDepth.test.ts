import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { depthExceededAt, exceedsDepth } from "../../src/common/jsonDepth.js"

/** The nesting depth, recursively (a reference for small values only). */
const depthOf = (u: unknown): number => {
  if (typeof u !== "object" || u === null) return 0
  const children = Array.isArray(u) ? u : Object.values(u)
  return 1 + children.reduce<number>((max, c) => Math.max(max, depthOf(c)), 0)
}

const arrays = (n: number): string => "[".repeat(n) + "]".repeat(n)

describe("exceedsDepth / depthExceededAt", () => {
  it("counts containers from the root; scalars add no level", () => {
    expect(exceedsDepth("text", 0)).toBe(false)
    expect(exceedsDepth(null, 0)).toBe(false)
    expect(exceedsDepth({}, 1)).toBe(false)
    expect(exceedsDepth({}, 0)).toBe(true)
    expect(exceedsDepth({ a: [1, "x", null] }, 2)).toBe(false)
    expect(exceedsDepth({ a: [1, "x", {}] }, 2)).toBe(true)
    expect(depthExceededAt({ a: [1, "x", {}] }, 2)).toEqual(["a", 2])
  })

  it("exactly at the limit passes, one more level does not", () => {
    expect(depthExceededAt(JSON.parse(arrays(64)), 64)).toBeUndefined()
    expect(depthExceededAt(JSON.parse(arrays(65)), 64)).toEqual(Array.from({ length: 64 }, () => 0))
  })

  it("names the first too-deep place in document order, under any key", () => {
    const body = { a: 1, b: { c: [{}, { d: [[[]]] }] }, e: [[[[[]]]]] }
    expect(depthExceededAt(body, 4)).toEqual(["b", "c", 1, "d"])
    const proto = JSON.parse(`{"x":1,"__proto__":${arrays(3)}}`)
    expect(depthExceededAt(proto, 3)).toEqual(["__proto__", 0, 0])
  })

  it("no stack overflow for a million levels, arrays or objects, and stops early", () => {
    const deepArray: unknown = JSON.parse(arrays(1_000_000))
    expect(exceedsDepth(deepArray, 64)).toBe(true)
    expect(depthExceededAt(deepArray, 64)?.length).toBe(64)
    const deepObject: unknown = JSON.parse(`${'{"a":'.repeat(200_000)}1${"}".repeat(200_000)}`)
    expect(depthExceededAt(deepObject, 64)?.length).toBe(64)
  })

  it("a wide value within the limit: no error", () => {
    const wide = Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`k${i}`, [{ v: i }]]))
    expect(depthExceededAt(wide, 3)).toBeUndefined()
    expect(exceedsDepth(wide, 2)).toBe(true)
  })

  it.prop(
    "agrees with the recursive depth, and the path leads to a container one level too deep",
    [FastCheck.jsonValue({ maxDepth: 8 }), FastCheck.integer({ min: 0, max: 8 })],
    ([value, max]) => {
      expect(exceedsDepth(value, max)).toBe(depthOf(value) > max)
      const at = depthExceededAt(value, max)
      expect(at === undefined).toBe(depthOf(value) <= max)
      if (at === undefined) return
      expect(at.length).toBe(max)
      const reached = at.reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], value)
      expect(typeof reached === "object" && reached !== null).toBe(true)
    },
    { fastCheck: { numRuns: 500 } }
  )
})
