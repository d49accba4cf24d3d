import * as Stream from "effect/Stream"
import { LocalNode, Provider, RunEvent } from "iop-edge"

/** Our own model: answers in upper case, word by word. The whole provider, served as the model "shout". */
export const ShoutModel = LocalNode.layerModel(
  { id: "shout", aliases: ["loud"] },
  Provider.fromStream((request) => {
    const last = request.messages.at(-1)?.content
    const words = (typeof last === "string" ? last : "").toUpperCase().split(" ")
    const deltas = words.map((word, i) => RunEvent.delta(i === 0 ? word : ` ${word}`))
    return Stream.fromIterable([...deltas, RunEvent.complete({ finishReason: "stop", toolCalls: [], metadata: {} })])
  })
)
