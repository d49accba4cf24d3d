import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as TestClock from "effect/TestClock"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { decode, encode, type StoredResponse } from "../../src/store/ResponseStore.js"

/** The in-memory response store on the Clock: its TTL moves with the TestClock; its size bound is a write failure. */

const record = (text: string): StoredResponse => ({
  owner: null,
  response: { id: "resp_a", output: [{ id: "msg_a_0", type: "message", content: [{ type: "output_text", text }] }] },
  input: [{ id: "msg_a_in0", type: "message", role: "user", content: "hi" }]
})

describe("MemoryStore", () => {
  it.effect("a record is read back as stored until its TTL, by the Clock; then it is gone", () =>
    Effect.gen(function* () {
      const store = yield* MemoryStore.make({ maxEntries: 10, maxBytes: 10_000, ttlMs: 60_000 })
      yield* store.put("resp_a", record("hello"))
      expect(yield* store.get("resp_a")).toEqual(Option.some(record("hello")))
      yield* TestClock.adjust("59999 millis")
      expect(Option.isSome(yield* store.get("resp_a"))).toBe(true)
      yield* TestClock.adjust("1 millis")
      expect(yield* store.get("resp_a")).toEqual(Option.none())
    }))

  it.effect("delete forgets a record; a record larger than maxBytes is a write failure naming the bound", () =>
    Effect.gen(function* () {
      const store = yield* MemoryStore.make({ maxEntries: 10, maxBytes: 300, ttlMs: 60_000 })
      yield* store.put("resp_a", record("hello"))
      yield* store.delete("resp_a")
      expect(yield* store.get("resp_a")).toEqual(Option.none())
      const error = yield* Effect.flip(store.put("resp_b", record("x".repeat(400))))
      expect(error.message).toMatch(/^the response store could not write: the response \(\d+ bytes\) is larger than responses\.store\.maxBytes \(300\)$/)
      expect(yield* store.get("resp_b")).toEqual(Option.none())
    }))

  it.effect("maxBytes counts UTF-8 bytes: text beyond ASCII is read back whole and weighs what it encodes to", () =>
    Effect.gen(function* () {
      const small = encode(record("")).length
      // 40 characters of 3 bytes each: 40 more characters of JSON, 120 more bytes.
      const store = yield* MemoryStore.make({ maxEntries: 10, maxBytes: small + 100, ttlMs: 60_000 })
      const error = yield* Effect.flip(store.put("resp_a", record("€".repeat(40))))
      expect(error.message).toContain(`the response (${small + 120} bytes)`)
      yield* store.put("resp_b", record("café 🦊 ".repeat(5)))
      expect(yield* store.get("resp_b")).toEqual(Option.some(record("café 🦊 ".repeat(5))))
      // A lone surrogate (a model's broken UTF-16) survives too: the JSON escapes it before it is encoded.
      yield* store.put("resp_c", record("a\ud800b"))
      expect(yield* store.get("resp_c")).toEqual(Option.some(record("a\ud800b")))
    }))

  it("a stored value that is not a record is a read failure, never a defect", () => {
    expect(decode(encode(record("x")))._tag).toBe("Right")
    expect(decode("{").pipe((e) => e._tag === "Left" && e.left.message)).toBe("the response store could not read: a stored value is not JSON")
    expect(decode("{\"owner\":1}").pipe((e) => e._tag === "Left" && e.left.operation)).toBe("read")
  })
})
