import * as Session from "../../src/chat/session.js"

/** Folds a whole run's inputs at once through the session: its emissions, in order (`step` over every input). */
export const runSession = (
  config: Session.SessionConfig,
  inputs: Iterable<Session.SessionInput>
): ReadonlyArray<Session.Emission> => {
  let s = Session.initial(config)
  const out: Array<Session.Emission> = []
  for (const input of inputs) {
    const [next, emitted] = Session.step(s, input)
    s = next
    out.push(...emitted)
  }
  return out
}
