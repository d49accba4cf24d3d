import * as AiError from "@effect/ai/AiError"
import { describe, expect, it } from "@effect/vitest"
import { type EdgeError, fromEdgeError } from "../../src/ai/aiError.js"
import { ChatErrors, EdgeErrors, RunErrors, RunEvent } from "../../src/index.js"

const node = RunEvent.NodeId.make("n1")

/** Every tag of the typed API's failures, and the AiError each becomes. */
const cases: ReadonlyArray<readonly [EdgeError, "MalformedInput" | "MalformedOutput" | "UnknownError"]> = [
  [new EdgeErrors.InvalidRequest({ message: "temperature: must be at most 2", param: "temperature" }), "MalformedInput"],
  [new ChatErrors.ModelNotFound({ model: "nope" }), "MalformedInput"],
  [new RunErrors.RunRequestTooLarge({ bytes: 2_000_000, limit: 1_000_000 }), "MalformedInput"],
  [new ChatErrors.ToolValidationFailed({ reason: "bad arguments", tool: "f" }), "MalformedOutput"],
  [new RunErrors.NoNodeForModel({ model: "m" }), "UnknownError"],
  [new RunErrors.NodesAtCapacity({ model: "m" }), "UnknownError"],
  [new RunErrors.NodeUnavailable({ nodeId: node, reason: "draining" }), "UnknownError"],
  [new EdgeErrors.RateLimited({ scope: "edge", limit: 4 }), "UnknownError"],
  [new ChatErrors.RunFailed({ reason: "upstream exploded" }), "UnknownError"],
  [new ChatErrors.RunTimedOut({ bound: "idle", ms: 30_000 }), "UnknownError"],
  [new ChatErrors.ToolValidationRetryFailed({ reason: "no node" }), "UnknownError"],
  [new ChatErrors.UpstreamRejected({ status: 400, code: null, message: "bad field", retryAfter: null }), "MalformedInput"],
  [new ChatErrors.UpstreamRejected({ status: 429, code: null, message: "slow down", retryAfter: 3 }), "UnknownError"],
  [new ChatErrors.UpstreamRejected({ status: 404, code: null, message: "no such model", retryAfter: null }), "UnknownError"]
]

describe("the edge's failures as AiError", () => {
  it("each tag to its variant, keeping the tag and message in the description and the error as the cause", () => {
    for (const [error, variant] of cases) {
      const mapped = fromEdgeError("generateText", error)
      expect(AiError.isAiError(mapped)).toBe(true)
      expect({ tag: error._tag, variant: mapped._tag }).toEqual({ tag: error._tag, variant })
      expect(mapped).toMatchObject({ module: "EdgeLanguageModel", method: "generateText", cause: { _tag: error._tag } })
      expect(mapped.description?.startsWith(`${error._tag}: `)).toBe(true)
    }
    const tags = new Set(cases.map(([e]) => e._tag))
    expect(tags.size).toBe(12)
  })

  it("the message is the edge's own: the HTTP answer's for an upstream's status", () => {
    const mapped = fromEdgeError("streamText", new ChatErrors.RunTimedOut({ bound: "idle", ms: 1 }))
    expect(mapped.description).toBe("RunTimedOut: run timed out")
    const other = fromEdgeError("streamText", new ChatErrors.UpstreamRejected({ status: 404, code: null, message: "gone", retryAfter: null }))
    expect(other.description).toBe("UpstreamRejected: upstream answered HTTP 404: gone")
  })

  it("an upstream's refusal of the edge's credentials never carries the upstream's text (it may echo them)", () => {
    for (const status of [401, 403]) {
      const mapped = fromEdgeError("generateText", new ChatErrors.UpstreamRejected({
        status,
        code: "invalid_api_key",
        message: "Incorrect API key provided: sk-secret",
        retryAfter: null
      }))
      expect(`${JSON.stringify(mapped)} ${JSON.stringify(mapped.cause)} ${mapped.message}`).not.toContain("sk-secret")
      expect(mapped.description).toBe(`UpstreamRejected: ${ChatErrors.CREDENTIALS_REFUSED}`)
      expect(mapped.cause).toMatchObject({ _tag: "UpstreamRejected", status, message: ChatErrors.CREDENTIALS_REFUSED })
    }
  })
})
