/**
 * One Aho–Corasick automaton over all enabled open hints, matching in ASCII case-insensitive fashion: the text-mode
 * state of the hold-back is one number (a node), each char costs one table lookup, however many hints are enabled.
 *
 * A node stands for the longest suffix of the text that is a prefix of some hint; its depth is how much text is held.
 * Which hint completes: the one ending earliest, and of those ending at the same char the longest (it starts
 * earliest). When no hint is a proper substring of another (the registry's test checks this), a completed hint is
 * the only match alive at its end, so the rule never has to choose.
 */
import { lowerCode } from "../toolcalls/block.js"

export interface HintAutomaton {
  readonly hints: ReadonlyArray<string>
  /** From the root: ASCII char code (either case) → next node; 0 when the char starts no hint. */
  readonly root: Int32Array
  /** Some hint starts with a non-ASCII char: the root cannot skip those by the ASCII table alone. */
  readonly otherStarts: boolean
  /** ASCII char code (either case) → its column; 0 for a char in no hint. */
  readonly asciiColumn: Int32Array
  /** Non-ASCII char code → its column (absent: 0). */
  readonly otherColumn: ReadonlyMap<number, number>
  readonly width: number
  /** `node * width + column` → the next node. */
  readonly next: Int32Array
  /** Per node: how many chars of text it stands for. */
  readonly depth: Int32Array
  /** Per node: the hint that completes there (the longest ending there), or -1. */
  readonly done: Int32Array
  /** Per node: the hint whose committed part the text ends with (the longest such suffix), or -1. */
  readonly dangling: Int32Array
  /** Per node: how long that suffix is. */
  readonly danglingLength: Int32Array
}

/** The next node after char `code` (as it appears in the text, any case). */
export const hintStep = (a: HintAutomaton, node: number, code: number): number => {
  if (node === 0 && code < 128) return a.root[code] ?? 0
  const column = code < 128 ? a.asciiColumn[code] ?? 0 : a.otherColumn.get(code) ?? 0
  return a.next[node * a.width + column] ?? 0
}

/** `committed[k]`: how much of hint k, at the end of the stream, makes a dangling open tag. */
export const buildHints = (hints: ReadonlyArray<string>, committed: ReadonlyArray<number>): HintAutomaton => {
  const codes = hints.map((h) => Array.from({ length: h.length }, (_, i) => lowerCode(h.charCodeAt(i))))
  // Columns: one per distinct (lower-case) char code of any hint; column 0 is every other char.
  const columnOf = new Map<number, number>()
  for (const list of codes) for (const c of list) if (!columnOf.has(c)) columnOf.set(c, columnOf.size + 1)
  const width = columnOf.size + 1

  // The trie, as child maps while building.
  const children: Array<Map<number, number>> = [new Map()]
  const depthList: Array<number> = [0]
  const terminal: Array<number> = [-1]
  const committedBy: Array<number> = [-1]
  codes.forEach((list, k) => {
    let node = 0
    list.forEach((c, i) => {
      const kids = children[node] ?? new Map<number, number>()
      let child = kids.get(c)
      if (child === undefined) {
        child = children.length
        kids.set(c, child)
        children.push(new Map())
        depthList.push(i + 1)
        terminal.push(-1)
        committedBy.push(-1)
      }
      node = child
      if (i + 1 >= (committed[k] ?? list.length) && (committedBy[node] ?? -1) < 0) committedBy[node] = k
    })
    if (list.length > 0 && (terminal[node] ?? -1) < 0) terminal[node] = k
  })

  const count = children.length
  const next = new Int32Array(count * width)
  const depth = Int32Array.from(depthList)
  const done = new Int32Array(count).fill(-1)
  const dangling = new Int32Array(count).fill(-1)
  const danglingLength = new Int32Array(count)
  const fail = new Int32Array(count)
  // Breadth first, so a node's failure target (shallower) is complete before the node.
  const queue: Array<number> = [0]
  for (let q = 0; q < queue.length; q++) {
    const node = queue[q] ?? 0
    const f = fail[node] ?? 0
    const base = node * width
    if (node !== 0) {
      for (let col = 0; col < width; col++) next[base + col] = next[f * width + col] ?? 0
      done[node] = (terminal[node] ?? -1) >= 0 ? terminal[node] ?? -1 : done[f] ?? -1
      const own = committedBy[node] ?? -1
      dangling[node] = own >= 0 ? own : dangling[f] ?? -1
      danglingLength[node] = own >= 0 ? depth[node] ?? 0 : danglingLength[f] ?? 0
    }
    for (const [c, child] of children[node] ?? []) {
      const col = columnOf.get(c) ?? 0
      fail[child] = node === 0 ? 0 : next[f * width + col] ?? 0
      next[base + col] = child
      queue.push(child)
    }
  }

  const asciiColumn = new Int32Array(128)
  const root = new Int32Array(128)
  for (let c = 0; c < 128; c++) {
    asciiColumn[c] = columnOf.get(lowerCode(c)) ?? 0
    root[c] = next[asciiColumn[c] ?? 0] ?? 0
  }
  const otherColumn = new Map([...columnOf].filter(([c]) => c >= 128))
  const otherStarts = codes.some((list) => (list[0] ?? 0) >= 128)
  return { hints, root, otherStarts, asciiColumn, otherColumn, width, next, depth, done, dangling, danglingLength }
}
