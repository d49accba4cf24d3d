import { describe, expect, it } from "@effect/vitest"
import { decodeEvent, errorBodyMessage } from "../../../src/providers/openai/upstreamWire.js"

describe("upstreamWire", () => {
  it("errorBodyMessage: the upstream's message in the shapes servers use, else the body text", () => {
    expect(errorBodyMessage("{\"error\":{\"message\":\"model not found\",\"type\":\"invalid_request_error\"}}")).toBe(
      "model not found"
    )
    expect(errorBodyMessage("{\"error\":\"model 'x' not found, try pulling it first\"}")).toBe(
      "model 'x' not found, try pulling it first"
    )
    expect(errorBodyMessage("{\"object\":\"error\",\"message\":\"too long\",\"code\":400}")).toBe("too long")
    expect(errorBodyMessage("{\"detail\":\"Not Found\"}")).toBe("Not Found")
    expect(errorBodyMessage("\"quoted\"")).toBe("quoted")
    expect(errorBodyMessage("<html>Bad Gateway</html>\n")).toBe("<html>Bad Gateway</html>")
    expect(errorBodyMessage("")).toBe("no error message")
    expect(errorBodyMessage("{\"error\":{\"message\":\"\"}}")).toBe("{\"error\":{\"message\":\"\"}}")
    expect(errorBodyMessage("y".repeat(1000), 10)).toBe("yyyyyyyyyy…")
  })

  it("decodeEvent: [DONE], keep-alive data, unknown keys ignored, nulls accepted", () => {
    expect(decodeEvent(undefined, "[DONE]")).toEqual({ _tag: "Done" })
    expect(decodeEvent(undefined, "")).toEqual({ _tag: "Chunk", chunk: {} })
    const decoded = decodeEvent(
      undefined,
      "{\"id\":null,\"model\":null,\"choices\":null,\"usage\":null,\"timings\":{\"x\":1},\"obfuscation\":\"q\"}"
    )
    expect(decoded).toEqual({ _tag: "Chunk", chunk: { id: null, model: null, choices: null, usage: null } })
  })

  it("decodeEvent: content parts are accepted", () => {
    const decoded = decodeEvent(undefined, "{\"choices\":[{\"delta\":{\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}}]}")
    expect(decoded._tag).toBe("Chunk")
  })
})
