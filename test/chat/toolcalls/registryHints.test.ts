import { describe, expect, it } from "@effect/vitest"
import * as Holdback from "../../../src/chat/filters/holdback.js"
import { isWhitespace, lowerCode } from "../../../src/chat/toolcalls/block.js"
import { registry } from "../../../src/chat/toolcalls/registry.js"
import { TEXT_FORMATS } from "../../../src/chat/toolcalls/types.js"

const fold = (s: string) =>
  Array.from({ length: s.length }, (_, i) => String.fromCharCode(lowerCode(s.charCodeAt(i)))).join("")

describe("open hints of every format, all on at once", () => {
  const reg = registry(TEXT_FORMATS)
  const hints = reg.openers.map((o) => fold(o.open))

  it("start with an ASCII char that is not whitespace, and commit to at most the whole hint", () => {
    for (const o of reg.openers) {
      const first = o.open.charCodeAt(0)
      expect(first < 128 && !isWhitespace(first), o.open).toBe(true)
      expect(o.committed >= 1 && o.committed <= o.open.length, o.open).toBe(true)
    }
  })

  it("none contains another (else the one inside would open first and the longer could never match)", () => {
    for (const a of hints) {
      for (const b of hints) if (a !== b) expect(b.includes(a), `${a} inside ${b}`).toBe(false)
    }
    expect(new Set(hints).size).toBe(hints.length)
  })

  it("bare formats start with an ASCII char that is not whitespace", () => {
    for (const f of reg.bare) expect(f.first < 128 && !isWhitespace(f.first), f.format).toBe(true)
  })

  it("is compiled once per set of formats, not per request", () => {
    const tools = [{ name: "f" }]
    const a = Holdback.initial({ formats: [...TEXT_FORMATS], tools })
    const b = Holdback.initial({ formats: [...TEXT_FORMATS].reverse(), tools: [] })
    expect(a.config.scanner).toBe(b.config.scanner)
    expect(Holdback.initial({ formats: ["xml"], tools }).config.scanner).not.toBe(a.config.scanner)
  })
})
