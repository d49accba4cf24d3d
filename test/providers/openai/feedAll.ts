import * as RunEvent from "../../../src/protocol/RunEvent.js"
import * as Mapper from "../../../src/providers/openai/toRunEvents.js"

/** Runs the mapper over a sequence of inputs up to the first terminal event, as the provider's `streaming` state does. */
export const feedAll = (
  inputs: Iterable<Mapper.StreamInput>,
  init: Mapper.MapperState = Mapper.initial()
): ReadonlyArray<RunEvent.RunEvent> => {
  let state = init
  const out: Array<RunEvent.RunEvent> = []
  for (const input of inputs) {
    const [next, events] = Mapper.feed(state, input)
    state = next
    out.push(...events)
    const last = events.at(-1)
    if (last !== undefined && RunEvent.isTerminal(last)) break
  }
  return out
}
