/**
 * The streaming tool-text filter: text that is, or may still become, tool-call markup is held back; text around it
 * streams on; each block of markup becomes its calls (or one Malformed) as soon as it ends.
 *
 * Linear by construction: each char is stepped once through one Aho–Corasick automaton over all open hints
 * (`openHints.ts`: one table lookup a char, however many formats are on), or once through the open block's end
 * matcher; held text is kept as a list of chunks and joined once, when its block ends. The one rescan is a bare
 * candidate (`BareFormat`) that turns out not to be one: its text is scanned once more as text.
 *
 * Whitespace: a segment of text between blocks (or before the first / after the last) that is only whitespace is
 * dropped when it touches a block; any other segment is emitted verbatim. A dangling open hint at the end of the
 * stream that already names the format (`<tool_call`, `{{tool_call`, `[TOOL_CALLS`) is Malformed, not text: the
 * model started a call and was cut off. Anything shorter (`<tool_c`) is text.
 *
 * Several hints: the one that completes first opens its block (`openHints.ts`); no hint may contain another
 * (tested over the registry). Bare shapes: a response whose first non-whitespace char is a bare format's `first` is
 * held whole while some format sharing that char can still be it, and decided by `parse` at the end.
 */
import { type BareFormat, type BlockResult, isWhitespace, lowerCode } from "../toolcalls/block.js"
import type { Registry } from "../toolcalls/registry.js"
import { patternStep } from "../toolcalls/tagScan.js"
import type { ParsedToolCall, RequestTool, TextFormat } from "../toolcalls/types.js"
import { type Compiled, type Scanner, scannerFor, scannerOf } from "./scanner.js"
import { bareCalls, bareStates } from "./bareShapes.js"
import { type Chunks, join, push } from "./chunks.js"

export interface ToolTextOptions {
  readonly formats: ReadonlyArray<TextFormat>
  readonly tools: ReadonlyArray<RequestTool>
}

export type ToolTextOutput =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Call"; readonly call: ParsedToolCall }
  | { readonly _tag: "Malformed"; readonly reason: string }


interface Config {
  readonly tools: ReadonlyArray<RequestTool>
  readonly scanner: Scanner
  /** The bare formats in play (none without tools). */
  readonly bare: ReadonlyArray<BareFormat>
  /** No tools or no formats: text is text. */
  readonly pass: boolean
}

type Mode =
  | {
    readonly _tag: "Text"
    /** The longest suffix that may still become an open hint (never whitespace). */
    readonly partial: string
    /** The hint automaton's node: `partial` is as long as its depth. */
    readonly node: number
    /** Whitespace at the start of the segment, held until it is known whether it touches a block. */
    readonly ws: Chunks
    /** Some of the segment was emitted: the rest is emitted verbatim. */
    readonly hasText: boolean
    /** Only whitespace so far in the whole response, and a bare format is on. */
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
  | {
    readonly _tag: "Bare"
    readonly ws: Chunks
    /** From the shape's first char on. */
    readonly held: Chunks
    /** Per bare format of the config, its scan state; undefined once it cannot be this shape. */
    readonly states: ReadonlyArray<number | undefined>
  }

export interface ToolTextState {
  readonly config: Config
  readonly mode: Mode
  readonly sawBlock: boolean
}

const textMode = (ws: Chunks, bare: boolean): Mode => ({ _tag: "Text", partial: "", node: 0, ws, hasText: false, bare })

const start = (scanner: Scanner, tools: ReadonlyArray<RequestTool>): ToolTextState => {
  const bare = tools.length > 0 ? scanner.bare : []
  const config: Config = {
    tools,
    scanner,
    bare,
    pass: tools.length === 0 || (scanner.openers.length === 0 && bare.length === 0)
  }
  return { config, mode: textMode(undefined, bare.length > 0), sawBlock: false }
}

export const initial = (options: ToolTextOptions): ToolTextState => start(scannerFor(options.formats), options.tools)

/** A filter over formats given as a registry (tests and benchmarks of formats not in `TEXT_FORMATS`). */
export const initialWith = (reg: Registry, tools: ReadonlyArray<RequestTool>): ToolTextState =>
  start(scannerOf(reg), tools)

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
  const a = run.config.scanner.hints
  const { asciiColumn, depth, done, next, otherColumn, otherStarts, root, width } = a
  const n = text.length
  const segStart = from - m.partial.length
  let node = m.node
  // Where the first non-whitespace of the unemitted segment is (the partial is never whitespace).
  let firstText = m.partial.length > 0 ? segStart : -1
  let bare = m.bare
  for (let i = from; i < n; i++) {
    const code = text.charCodeAt(i)
    if (firstText < 0 && !isWhitespace(code)) {
      firstText = i
      if (bare) {
        const states = bareStates(run.config.bare, code)
        if (states !== undefined) {
          run.mode = { _tag: "Bare", ws: push(m.ws, text.slice(segStart, i)), held: undefined, states }
          return i
        }
        bare = false
      }
    }
    if (node === 0) {
      // Fast path through prose: one lookup for a char that starts no hint.
      if (code < 128) node = root[code] ?? 0
      else if (otherStarts) node = next[otherColumn.get(code) ?? 0] ?? 0
      if (node === 0) continue
    } else {
      node = next[node * width + (code < 128 ? asciiColumn[code] ?? 0 : otherColumn.get(code) ?? 0)] ?? 0
    }
    const hint = done[node] ?? -1
    if (hint >= 0) {
      const opener = run.config.scanner.openers[hint]
      if (opener === undefined) continue
      const start = i + 1 - opener.open.codes.length
      if (m.hasText || (firstText >= 0 && firstText < start)) {
        emitText(run, join(m.ws) + text.slice(segStart, start), start + run.shift)
      }
      run.sawBlock = true
      run.mode = openBlock(opener)
      return i + 1
    }
  }
  const holdStart = n - (depth[node] ?? 0)
  const released = text.slice(segStart, holdStart)
  const partial = text.slice(holdStart)
  if (m.hasText || (firstText >= 0 && firstText < holdStart)) {
    emitText(run, join(m.ws) + released, holdStart + run.shift)
    // Plain prose leaves the mode as it was: keep the object.
    const same = m.hasText && node === 0 && m.node === 0 && bare === m.bare
    run.mode = same ? m : { _tag: "Text", partial, node, ws: undefined, hasText: true, bare }
  } else {
    run.mode = { _tag: "Text", partial, node, ws: push(m.ws, released), hasText: false, bare }
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
      run.mode = closed ? textMode(undefined, false) : openBlock(m.c)
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
      run.mode = textMode(undefined, false)
      return i + 1
    }
  }
  run.mode = { _tag: "Scanned", c: m.c, body: push(m.body, text.slice(from)), scan: s }
  return text.length
}

/**
 * A response that so far is whitespace and the start of a bare shape (`{...`, `[...`): held whole while any bare
 * format can still be it. The first char (the shape's `first`) is held but not stepped: `start` is the state after it.
 */
const scanBare = (run: Run, m: Extract<Mode, { _tag: "Bare" }>, text: string, from: number): number => {
  const formats = run.config.bare
  const states = m.states.slice()
  let i = from
  if (m.held === undefined) i++
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i)
    let alive = false
    for (let k = 0; k < states.length; k++) {
      const s = states[k]
      const f = formats[k]
      if (s === undefined || f === undefined) continue
      // A closed shape may only be followed by whitespace.
      const t = f.done(s) ? (isWhitespace(c) ? s : undefined) : f.step(s, c)
      states[k] = t === undefined || f.dead(t) ? undefined : t
      alive ||= states[k] !== undefined
    }
    if (!alive) {
      // Not a bare call after all: scan what was held (and the rest of this chunk) once more, as ordinary text.
      run.mode = textMode(m.ws, false)
      const again = join(push(m.held, text.slice(from)))
      const shift = run.shift
      // `again` ends where `text` does.
      run.shift = shift + text.length - again.length
      scanAll(run, again, 0)
      run.shift = shift
      return text.length
    }
  }
  run.mode = { _tag: "Bare", ws: m.ws, held: push(m.held, text.slice(from)), states }
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

/** `cutOff`: the stream was cut by the token limit, so a held partial open tag is markup cut off, not text. */
const finish = (run: Run, cutOff: boolean): void => {
  const m = run.mode
  const tools = run.config.tools
  switch (m._tag) {
    case "Text": {
      const { dangling, danglingLength } = run.config.scanner.hints
      const opener = run.config.scanner.openers[dangling[m.node] ?? -1]
      if (opener !== undefined) {
        // The text ends inside an open tag that already names its format: a call cut off, not text.
        const tag = danglingLength[m.node] ?? 0
        const before = m.partial.slice(0, m.partial.length - tag)
        if (before !== "") emitText(run, join(m.ws) + before, -tag)
        emit(run, { _tag: "Malformed", reason: `${opener.opener.open}: the response ended inside the open tag` })
      } else if (cutOff && m.partial !== "") {
        if (m.hasText) emitText(run, join(m.ws), -m.partial.length)
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
      const found = bareCalls(run.config.bare, m.states, held.trim(), tools)
      if (found !== undefined) {
        for (const call of found) emit(run, { _tag: "Call", call })
        return
      }
      run.mode = textMode(m.ws, false)
      run.shift = -held.length
      scanAll(run, held, 0)
      finish(run, cutOff)
      return
    }
  }
}

/** `ends` as for `append`, as offsets from the end of the input (0 or less). */
export const flush = (state: ToolTextState, ends?: Array<number>, cutOff = false): ReadonlyArray<ToolTextOutput> => {
  if (state.config.pass) return []
  const run: Run = { config: state.config, out: undefined, mode: state.mode, sawBlock: state.sawBlock, ends, shift: 0 }
  finish(run, cutOff)
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
