/**
 * The answer's structure, when a family writes its answer as a list of messages rather than text with markup:
 * gpt-oss harmony (channels) or Functionary v3.2 (recipient lines). One of them at most is active for a model;
 * the session runs it first on raw content. Both engage only on an answer that starts their way, and otherwise
 * pass the text on.
 */
import * as FunctionaryV32 from "./functionaryV32.js"
import * as Harmony from "./harmony.js"
import type { TextFormat } from "../toolcalls/types.js"

export type Structure =
  | { readonly _tag: "Harmony"; readonly state: Harmony.HarmonyState }
  | { readonly _tag: "Functionary"; readonly state: FunctionaryV32.FunctionaryState }

export type StructureOutput = Harmony.HarmonyOutput | FunctionaryV32.FunctionaryOutput

/** The structure a model's formats call for: Functionary v3.2 only when named (it has no marker to start on). */
export const initial = (formats: ReadonlyArray<TextFormat>): Structure | undefined =>
  formats.includes("functionary_v32")
    ? { _tag: "Functionary", state: FunctionaryV32.initial }
    : formats.includes("harmony")
    ? { _tag: "Harmony", state: Harmony.initial }
    : undefined

export const append = (s: Structure, chunk: string): readonly [Structure, ReadonlyArray<StructureOutput>] => {
  if (s._tag === "Harmony") {
    const [state, out] = Harmony.append(s.state, chunk)
    return [state === s.state ? s : { _tag: "Harmony", state }, out]
  }
  const [state, out] = FunctionaryV32.append(s.state, chunk)
  return [state === s.state ? s : { _tag: "Functionary", state }, out]
}

/** `cutOff`: the token limit cut the answer (what is held is a message cut short). */
export const flush = (s: Structure, cutOff: boolean): ReadonlyArray<StructureOutput> =>
  s._tag === "Harmony" ? Harmony.flush(s.state) : FunctionaryV32.flush(s.state, cutOff)

/** Known to be this structure: its outputs are routed, not passed on as text. */
export const engaged = (s: Structure): boolean =>
  s._tag === "Harmony" ? Harmony.engaged(s.state) : FunctionaryV32.engaged(s.state)

/** Not yet known whether the answer is this structure (the filter holds what it has seen). */
export const undecided = (s: Structure): boolean => s.state._tag === "Leading"
