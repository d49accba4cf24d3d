/**
 * What the hold-back scanner compiles a set of enabled formats to: the openers with their tag matchers, and one
 * automaton over all their open hints. Built once per set of formats and shared by every request that enables it.
 */
import { type BareFormat, lowerCode } from "../toolcalls/block.js"
import { type Registry, registry, type ScannedOpener, type TagOpener } from "../toolcalls/registry.js"
import { compilePattern, type Pattern } from "../toolcalls/tagScan.js"
import type { TextFormat } from "../toolcalls/types.js"
import { buildHints, type HintAutomaton } from "./openHints.js"

export type Compiled =
  | { readonly _tag: "Tag"; readonly opener: TagOpener; readonly open: Pattern; readonly close: Pattern }
  | { readonly _tag: "Scanned"; readonly opener: ScannedOpener; readonly open: Pattern }

export interface Scanner {
  /** Indexed as the automaton's hints. */
  readonly openers: ReadonlyArray<Compiled>
  readonly hints: HintAutomaton
  readonly bare: ReadonlyArray<BareFormat>
}

/** Open hints that are the same in any case are one hint: the first opener that has it wins. */
const compile = (reg: Registry): Scanner => {
  const seen = new Set<string>()
  const openers: Array<Compiled> = []
  for (const opener of reg.openers) {
    const key = Array.from(opener.open, (ch) => String.fromCharCode(lowerCode(ch.charCodeAt(0)))).join("")
    if (seen.has(key) || key === "") continue
    seen.add(key)
    openers.push(
      opener._tag === "Tag"
        ? { _tag: "Tag", opener, open: compilePattern(opener.open), close: compilePattern(opener.close) }
        : { _tag: "Scanned", opener, open: compilePattern(opener.open) }
    )
  }
  const hints = buildHints(openers.map((c) => c.opener.open), openers.map((c) => c.opener.committed))
  return { openers, hints, bare: reg.bare }
}

// One scanner per distinct set of enabled formats (there are a few per deployment): built once, not per request.
const byFormats = new Map<string, Scanner>()
const byRegistry = new WeakMap<Registry, Scanner>()
const MAX_SCANNERS = 256

export const scannerFor = (formats: ReadonlyArray<TextFormat>): Scanner => {
  const key = [...new Set(formats)].sort().join(",")
  const known = byFormats.get(key)
  if (known !== undefined) return known
  if (byFormats.size >= MAX_SCANNERS) byFormats.clear()
  const built = compile(registry(formats))
  byFormats.set(key, built)
  return built
}

/** A registry given as is (tests and benchmarks of formats not in `TEXT_FORMATS`): compiled once per object. */
export const scannerOf = (reg: Registry): Scanner => {
  const known = byRegistry.get(reg)
  if (known !== undefined) return known
  const built = compile(reg)
  byRegistry.set(reg, built)
  return built
}
