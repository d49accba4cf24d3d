import * as Effect from "effect/Effect"
import type { RunDispatch } from "../run/RunHandle.js"
import type * as Session from "./session.js"
import type { RunTrace } from "./SessionRun.js"

const traceText = (e: Session.Emission): string => {
  switch (e._tag) {
    case "Content":
    case "Reasoning":
      return e.text
    case "ToolCalls":
      return JSON.stringify(e.calls)
    case "Finish":
      return e.finishReason
    case "Error":
      return e.error.message
  }
}

/** Trace mode: each emission, and each delta that emitted nothing, as a log line with a sequence number. */
export const makeRunTrace = (dispatch: RunDispatch): RunTrace => {
  let seq = 0
  const lines: Array<Effect.Effect<void>> = []
  const line = (message: string, annotations: Record<string, unknown>) =>
    lines.push(Effect.logInfo(message).pipe(Effect.annotateLogs({ run_id: dispatch.runId, ...annotations })))
  return {
    step: (input, out) => {
      if (out.length === 0 && (input._tag === "Delta" || input._tag === "ReasoningDelta")) {
        line("stream output suppressed", { seq, type: input._tag, source: input.text })
      }
      for (const e of out) line("stream output chunk", { seq: ++seq, type: e._tag, emission: traceText(e) })
    },
    flush: Effect.suspend(() => Effect.all(lines.splice(0), { discard: true }))
  }
}
