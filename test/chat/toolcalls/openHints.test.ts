import { describe, expect, it } from "@effect/vitest"
import { registry } from "../../../src/chat/toolcalls/registry.js"
import { ALL_MARKUP } from "./holdbackHarness.js"

describe("open hints of every markup format", () => {
  const hints = registry(ALL_MARKUP).openers.map((o) => o.open.toLowerCase())

  it("one opener per hint, each starting with an ASCII char", () => {
    expect(new Set(hints).size).toBe(hints.length)
    for (const h of hints) expect(h.charCodeAt(0)).toBeLessThan(128)
  })

  it("no hint is inside another, nor holds another's first char past its own start (the hold-back relies on it)", () => {
    for (const a of hints) {
      for (const b of hints) {
        if (a === b) continue
        expect(b.includes(a)).toBe(false)
        expect(b.slice(1).includes(a[0] ?? "")).toBe(false)
      }
    }
  })
})
