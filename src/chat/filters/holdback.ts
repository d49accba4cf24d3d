/**
 * The streaming tool-text filter: text that is, or may still become, tool-call markup is held back; text around it
 * streams on; each block of markup becomes its calls (or one Malformed) as soon as it ends.
 *
 * Linear by construction: each char is stepped once through a rolling (KMP) match of the open hints, or once
 * through the open block's end matcher; held text is kept as a list of chunks and joined once, when its block ends.
 * The one rescan is a bare_json candidate that turns out not to be one: its text is scanned once more as text.
 *
 * Whitespace: a segment of text between blocks (or before the first / after the last) that is only whitespace is
 * dropped when it touches a block; any other segment is emitted verbatim. A dangling open hint at the end of the
 * stream that already names the format (`<tool_call`, `{{tool_call`, `[TOOL_CALLS`) is Malformed, not text: the
 * model started a call and was cut off. Anything shorter (`<tool_c`) is text.
 */
import { type BlockResult, isWhitespace, lowerCode } from "../toolcalls/block.js"
import { JSON_OPENED, jsonClosed, jsonStep } from "../toolcalls/jsonScan.js"
import { registry, type ScannedOpener, type TagOpener } from "../toolcalls/registry.js"
import { compilePattern, type Pattern, patternStep } from "../toolcalls/tagScan.js"
import type { ParsedToolCall, RequestTool, TextFormat } from "../toolcalls/types.js"

export interface ToolTextOptions {
  readonly formats: ReadonlyArray<TextFormat>
  readonly tools: ReadonlyArray<RequestTool>
}

export type ToolTextOutput =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Call"; readonly call: ParsedToolCall }
  | { readonly _tag: "Malformed"; readonly reason: string }

type Compiled =
  | { readonly _tag: "Tag"; readonly opener: TagOpener; readonly open: Pattern; readonly close: Pattern }
  | { readonly _tag: "Scanned"; readonly opener: ScannedOpener; readonly open: Pattern }

interface Config {
  readonly tools: ReadonlyArray<RequestTool>
  readonly openers: ReadonlyArray<Compiled>
  readonly noMatch: ReadonlyArray<number>
  /** Flags, by ASCII code, the chars an open hint starts with (in either case). */
  readonly starts: Uint8Array
  readonly bare: ((text: string, tools: ReadonlyArray<RequestTool>) => ParsedToolCall | undefined) | undefined
  /** No tools or no formats: text is text. */
  readonly pass: boolean
}

/**
 * Held text: `parts[0, length)`. Appending pushes onto `parts` while this is its longest holder and copies otherwise,
 * so a state appended to twice stays intact (a persistent list with amortised O(1) appends and one join at the end).
 */
type Chunks = { readonly parts: Array<string>; readonly length: number } | undefined

// Phases of a bare_json candidate: before its `{`, before its first key, inside the object, after it.
const BARE_START = 0
const BARE_KEY = 1
const BARE_BODY = 2
const BARE_CLOSED = 3

type Mode =
  | {
    readonly _tag: "Text"
    /** The longest suffix that may still become an open hint (never whitespace). */
    readonly partial: string
    /** Per opener, how many chars of its open hint the text ends with. */
    readonly matched: ReadonlyArray<number>
    /** Whitespace at the start of the segment, held until it is known whether it touches a block. */
    readonly ws: Chunks
    /** Some of the segment was emitted: the rest is emitted verbatim. */
    readonly hasText: boolean
    /** Only whitespace so far in the whole response, and bare_json is on. */
    readonly bare: boolean
  }
  | {
    readonly _tag: "Tag"
    readonly c: Extract<Compiled, { _tag: "Tag" }>
    readonly body: Chunks
    readonly close: number
    readonly reopen: number
  }
  | {
    readonly _tag: "Scanned"
    readonly c: Extract<Compiled, { _tag: "Scanned" }>
    readonly body: Chunks
    readonly scan: number
  }
  | { readonly _tag: "Bare"; readonly ws: Chunks; readonly held: Chunks; readonly phase: number; readonly scan: number }

export interface ToolTextState {
  readonly config: Config
  readonly mode: Mode
  readonly sawBlock: boolean
}

const push = (held: Chunks, text: string): Chunks => {
  if (text === "") return held
  if (held === undefined) return { parts: [text], length: 1 }
  const parts = held.parts.length === held.length ? held.parts : held.parts.slice(0, held.length)
  parts.push(text)
  return { parts, length: held.length + 1 }
}

const join = (held: Chunks): string => {
  if (held === undefined) return ""
  if (held.length === 1) return held.parts[0] ?? ""
  return (held.parts.length === held.length ? held.parts : held.parts.slice(0, held.length)).join("")
}

const textMode = (config: Config, ws: Chunks, bare: boolean): Mode => ({
  _tag: "Text",
  partial: "",
  matched: config.noMatch,
  ws,
  hasText: false,
  bare
})

export const initial = (options: ToolTextOptions): ToolTextState => {
  const reg = registry(options.formats)
  const openers = reg.openers.map((opener): Compiled =>
    opener._tag === "Tag"
      ? { _tag: "Tag", opener, open: compilePattern(opener.open), close: compilePattern(opener.close) }
      : { _tag: "Scanned", opener, open: compilePattern(opener.open) }
  )
  const bare = options.tools.length > 0 ? reg.bare : undefined
  const starts = new Uint8Array(128)
  // Open hints are ASCII.
  for (const opener of reg.openers) {
    const lower = lowerCode(opener.open.charCodeAt(0))
    starts[lower] = 1
    starts[lower >= 0x61 && lower <= 0x7a ? lower - 0x20 : lower] = 1
  }
  const config: Config = {
    tools: options.tools,
    openers,
    noMatch: openers.map(() => 0),
    starts,
    bare,
    pass: options.tools.length === 0 || (openers.length === 0 && bare === undefined)
  }
  return { config, mode: textMode(config, undefined, bare !== undefined), sawBlock: false }
}

/** The mutable scratch of one append or flush; the state it ends with is frozen into a new ToolTextState. */
interface Run {
  readonly config: Config
  /** Made on the first output: most deltas of a stream emit one Text or nothing. */
  out: Array<ToolTextOutput> | undefined
  mode: Mode
  sawBlock: boolean
  /** When asked for (logprobs): where each Text output ends, as an offset in the appended chunk. */
  readonly ends: Array<number> | undefined
  /** Scanned-text index → chunk offset. */
  shift: number
}

const NOTHING: ReadonlyArray<ToolTextOutput> = []

const emit = (run: Run, output: ToolTextOutput): void => {
  if (run.out === undefined) run.out = [output]
  else run.out.push(output)
}

/** `end`: the chunk offset where the text ends (texts are contiguous slices of the input, so merged ones too). */
const emitText = (run: Run, text: string, end: number): void => {
  if (text === "") return
  const out = run.out
  const last = out?.[out.length - 1]
  const merged = out !== undefined && last?._tag === "Text"
  if (merged) out[out.length - 1] = { _tag: "Text", text: last.text + text }
  else emit(run, { _tag: "Text", text })
  if (run.ends === undefined) return
  if (merged) run.ends[run.ends.length - 1] = end
  else run.ends.push(end)
}

const emitBlock = (run: Run, result: BlockResult): void => {
  if (result._tag === "Malformed") emit(run, { _tag: "Malformed", reason: result.reason })
  else for (const call of result.calls) emit(run, { _tag: "Call", call })
}

const openBlock = (c: Compiled): Mode =>
  c._tag === "Tag"
    ? { _tag: "Tag", c, body: undefined, close: 0, reopen: 0 }
    : { _tag: "Scanned", c, body: undefined, scan: c.opener.format.start }

/** Text mode: `text[i - partial.length, i)` is the held partial. */
const scanText = (run: Run, m: Extract<Mode, { _tag: "Text" }>, text: string, from: number): number => {
  const openers = run.config.openers
  const n = text.length
  const segStart = from - m.partial.length
  // Our copy of m.matched, made on the first step of a match: most chunks of prose never need one.
  let own: Array<number> | undefined
  // Where the first non-whitespace of the unemitted segment is (the partial is never whitespace).
  let firstText = m.partial.length > 0 ? segStart : -1
  let bare = m.bare
  let alive = m.partial.length > 0
  const starts = run.config.starts
  for (let i = from; i < n; i++) {
    const code = text.charCodeAt(i)
    if (firstText < 0 && !isWhitespace(code)) {
      firstText = i
      if (bare) {
        if (code === 0x7b) {
          const ws = push(m.ws, text.slice(segStart, i))
          run.mode = { _tag: "Bare", ws, held: undefined, phase: BARE_START, scan: 0 }
          return i
        }
        bare = false
      }
    }
    // Fast path through prose: nothing to match until an open hint's first char.
    if (!alive && (code >= 128 || starts[code] !== 1)) continue
    const c = lowerCode(code)
    alive = false
    const matched = own ?? (own = m.matched.slice())
    for (let k = 0; k < openers.length; k++) {
      const opener = openers[k]
      if (opener === undefined) continue
      const j = patternStep(opener.open, matched[k] ?? 0, c)
      matched[k] = j
      alive ||= j > 0
      // No open hint contains another's first char, so no longer partial match can still be alive here.
      if (j === opener.open.codes.length) {
        const start = i + 1 - j
        if (m.hasText || (firstText >= 0 && firstText < start)) {
          emitText(run, join(m.ws) + text.slice(segStart, start), start + run.shift)
        }
        run.sawBlock = true
        run.mode = openBlock(opener)
        return i + 1
      }
    }
  }
  const matched = alive ? own ?? m.matched : run.config.noMatch
  let longest = 0
  for (const j of matched) longest = Math.max(longest, j)
  const holdStart = n - longest
  const released = text.slice(segStart, holdStart)
  const partial = text.slice(holdStart)
  if (m.hasText || (firstText >= 0 && firstText < holdStart)) {
    emitText(run, join(m.ws) + released, holdStart + run.shift)
    // Plain prose leaves the mode as it was: keep the object.
    const same = m.hasText && partial === "" && m.partial === "" && matched === m.matched && bare === m.bare
    run.mode = same ? m : { _tag: "Text", partial, matched, ws: undefined, hasText: true, bare }
  } else {
    run.mode = { _tag: "Text", partial, matched, ws: push(m.ws, released), hasText: false, bare }
  }
  return n
}

const scanTag = (run: Run, m: Extract<Mode, { _tag: "Tag" }>, text: string, from: number): number => {
  const { close, open, opener } = m.c
  let cj = m.close
  let oj = m.reopen
  const closeFirst = close.codes[0]
  const openFirst = open.codes[0]
  for (let i = from; i < text.length; i++) {
    const c = lowerCode(text.charCodeAt(i))
    // Fast path through the body: nothing to match until a tag's first char.
    if (cj === 0 && oj === 0 && c !== closeFirst && c !== openFirst) continue
    cj = patternStep(close, cj, c)
    oj = patternStep(open, oj, c)
    const closed = cj === close.codes.length
    // An open tag inside a block ends it: the model left out the close tag and started the next call.
    if (closed || oj === open.codes.length) {
      const full = join(push(m.body, text.slice(from, i + 1)))
      const tagLength = closed ? close.codes.length : open.codes.length
      emitBlock(run, opener.parse(full.slice(0, full.length - tagLength), closed, run.config.tools))
      run.mode = closed ? textMode(run.config, undefined, false) : openBlock(m.c)
      return i + 1
    }
  }
  run.mode = { _tag: "Tag", c: m.c, body: push(m.body, text.slice(from)), close: cj, reopen: oj }
  return text.length
}

const scanScanned = (run: Run, m: Extract<Mode, { _tag: "Scanned" }>, text: string, from: number): number => {
  const format = m.c.opener.format
  let s = m.scan
  for (let i = from; i < text.length; i++) {
    s = format.step(s, text.charCodeAt(i))
    if (format.done(s)) {
      emitBlock(run, format.parse(join(push(m.body, text.slice(from, i + 1))), true, run.config.tools))
      run.mode = textMode(run.config, undefined, false)
      return i + 1
    }
  }
  run.mode = { _tag: "Scanned", c: m.c, body: push(m.body, text.slice(from)), scan: s }
  return text.length
}

/** A response that so far is whitespace and a `{...` that may still be one bare JSON object: held whole. */
const scanBare = (run: Run, m: Extract<Mode, { _tag: "Bare" }>, text: string, from: number): number => {
  let phase = m.phase
  let s = m.scan
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i)
    let alive = true
    if (phase === BARE_START) {
      s = JSON_OPENED
      phase = BARE_KEY
    } else if (phase === BARE_KEY) {
      if (c === 0x22 || c === 0x7d) {
        s = jsonStep(s, c)
        phase = jsonClosed(s) ? BARE_CLOSED : BARE_BODY
      } else alive = isWhitespace(c)
    } else if (phase === BARE_BODY) {
      s = jsonStep(s, c)
      if (jsonClosed(s)) phase = BARE_CLOSED
    } else alive = isWhitespace(c)
    if (!alive) {
      // Not a bare call after all: scan what was held (and the rest of this chunk) once more, as ordinary text.
      run.mode = textMode(run.config, m.ws, false)
      const again = join(push(m.held, text.slice(from)))
      const shift = run.shift
      // `again` ends where `text` does.
      run.shift = shift + text.length - again.length
      scanAll(run, again, 0)
      run.shift = shift
      return text.length
    }
  }
  run.mode = { _tag: "Bare", ws: m.ws, held: push(m.held, text.slice(from)), phase, scan: s }
  return text.length
}

const scanAll = (run: Run, text: string, from: number): void => {
  let i = from
  while (i < text.length) {
    const m = run.mode
    switch (m._tag) {
      case "Text":
        i = scanText(run, m, text, i)
        break
      case "Tag":
        i = scanTag(run, m, text, i)
        break
      case "Scanned":
        i = scanScanned(run, m, text, i)
        break
      case "Bare":
        i = scanBare(run, m, text, i)
        break
    }
  }
}

/**
 * `ends`, when given (logprobs need it), gets the end of each Text output pushed onto it: its offset in `chunk`,
 * negative when the text ends inside text held from before.
 */
export const append = (
  state: ToolTextState,
  chunk: string,
  ends?: Array<number>
): readonly [ToolTextState, ReadonlyArray<ToolTextOutput>] => {
  if (state.config.pass) {
    if (chunk === "") return [state, []]
    ends?.push(chunk.length)
    return [state, [{ _tag: "Text", text: chunk }]]
  }
  if (chunk === "") return [state, []]
  // The held partial is at most one open hint long, so prepending it rescans a bounded number of chars.
  const partial = state.mode._tag === "Text" ? state.mode.partial : ""
  const run: Run = {
    config: state.config,
    out: undefined,
    mode: state.mode,
    sawBlock: state.sawBlock,
    ends,
    shift: -partial.length
  }
  scanAll(run, partial + chunk, partial.length)
  const same = run.mode === state.mode && run.sawBlock === state.sawBlock
  return [same ? state : { config: state.config, mode: run.mode, sawBlock: run.sawBlock }, run.out ?? NOTHING]
}

const finish = (run: Run): void => {
  const m = run.mode
  const tools = run.config.tools
  switch (m._tag) {
    case "Text": {
      let dangling: Compiled | undefined
      m.matched.forEach((j, k) => {
        const opener = run.config.openers[k]
        if (opener !== undefined && j >= opener.opener.committed) dangling = opener
      })
      if (dangling !== undefined) {
        emit(run, { _tag: "Malformed", reason: `${dangling.opener.open}: the response ended inside the open tag` })
      } else if (m.hasText || m.partial !== "" || !run.sawBlock) {
        emitText(run, join(m.ws) + m.partial, 0)
      }
      return
    }
    case "Tag": {
      // A close or open tag cut off by the end of the stream is not part of the body.
      const full = join(m.body)
      emitBlock(run, m.c.opener.parse(full.slice(0, full.length - Math.max(m.close, m.reopen)), false, tools))
      return
    }
    case "Scanned":
      emitBlock(run, m.c.opener.format.parse(join(m.body), false, tools))
      return
    case "Bare": {
      const held = join(m.held)
      const call = m.phase === BARE_CLOSED ? run.config.bare?.(held, tools) : undefined
      if (call !== undefined) {
        emit(run, { _tag: "Call", call })
        return
      }
      run.mode = textMode(run.config, m.ws, false)
      run.shift = -held.length
      scanAll(run, held, 0)
      finish(run)
      return
    }
  }
}

/** `ends` as for `append`, as offsets from the end of the input (0 or less). */
export const flush = (state: ToolTextState, ends?: Array<number>): ReadonlyArray<ToolTextOutput> => {
  if (state.config.pass) return []
  const run: Run = { config: state.config, out: undefined, mode: state.mode, sawBlock: state.sawBlock, ends, shift: 0 }
  finish(run)
  return run.out ?? NOTHING
}

/** Whole text at once (= append + flush), for the non-stream path. */
export const parseText = (
  text: string,
  options: ToolTextOptions
): {
  readonly text: string
  readonly calls: ReadonlyArray<ParsedToolCall>
  readonly malformed: ReadonlyArray<string>
} => {
  const [state, out] = append(initial(options), text)
  const parts: Array<string> = []
  const calls: Array<ParsedToolCall> = []
  const malformed: Array<string> = []
  for (const o of [...out, ...flush(state)]) {
    if (o._tag === "Text") parts.push(o.text)
    else if (o._tag === "Call") calls.push(o.call)
    else malformed.push(o.reason)
  }
  return { text: parts.join(""), calls, malformed }
}
