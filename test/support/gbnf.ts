/**
 * A small GBNF reader for tests: parses grammar text (llama.cpp's syntax as `grammars/README.md` describes it),
 * recognises strings (sets of end positions, memoised per rule and position: the grammars here are not left
 * recursive) and samples random strings by walking the rules (past a depth, the shallowest alternative).
 */
export type Node =
  | { readonly k: "lit"; readonly cps: ReadonlyArray<number> }
  | { readonly k: "cls"; readonly neg: boolean; readonly ranges: ReadonlyArray<readonly [number, number]> }
  | { readonly k: "ref"; readonly name: string }
  | { readonly k: "alt"; readonly opts: ReadonlyArray<Node> }
  | { readonly k: "seq"; readonly items: ReadonlyArray<Node> }
  | { readonly k: "rep"; readonly node: Node; readonly min: number; readonly max: number | undefined }

export type Grammar = ReadonlyMap<string, Node>

export type Parsed = { readonly ok: true; readonly grammar: Grammar } | { readonly ok: false; readonly error: string }

export const parseGbnf = (text: string): Parsed => {
  const rules = new Map<string, Node>()
  let pos = 0
  let error: string | undefined
  const fail = (m: string): Node => {
    error ??= `${m} at ${pos}: ${JSON.stringify(text.slice(pos, pos + 30))}`
    return { k: "seq", items: [] }
  }
  const space = (newlines: boolean) => {
    while (pos < text.length) {
      const c = text[pos]
      if (c === " " || c === "\t" || (newlines && (c === "\n" || c === "\r"))) pos++
      else if (c === "#") while (pos < text.length && text[pos] !== "\n") pos++
      else break
    }
  }
  const char = (): number => {
    if (text[pos] === "\\") {
      const e = text[pos + 1] ?? ""
      pos += 2
      const hex = (n: number) => {
        const v = parseInt(text.slice(pos, pos + n), 16)
        pos += n
        return v
      }
      if (e === "x") return hex(2)
      if (e === "u") return hex(4)
      if (e === "U") return hex(8)
      const simple: Record<string, number> = { t: 9, r: 13, n: 10, "\\": 92, "\"": 34, "[": 91, "]": 93, "-": 45 }
      const v = simple[e]
      if (v === undefined) fail("unknown escape")
      return v ?? 0
    }
    const cp = text.codePointAt(pos) ?? 0
    pos += cp > 0xffff ? 2 : 1
    return cp
  }
  const name = (): string => {
    const m = /^[a-zA-Z0-9-]+/.exec(text.slice(pos))
    if (m === null) return ""
    pos += m[0].length
    return m[0]
  }
  const alternatives = (nested: boolean): Node => {
    const opts: Array<Node> = [sequence(nested)]
    while (text[pos] === "|") {
      pos++
      space(true)
      opts.push(sequence(nested))
    }
    return opts.length === 1 && opts[0] !== undefined ? opts[0] : { k: "alt", opts }
  }
  const sequence = (nested: boolean): Node => {
    const items: Array<Node> = []
    for (;;) {
      space(nested)
      const c = text[pos]
      let node: Node
      if (c === "\"") {
        pos++
        const cps: Array<number> = []
        while (pos < text.length && text[pos] !== "\"") cps.push(char())
        pos++
        node = { k: "lit", cps }
      } else if (c === "[") {
        pos++
        const neg = text[pos] === "^"
        if (neg) pos++
        const ranges: Array<[number, number]> = []
        while (pos < text.length && text[pos] !== "]") {
          const lo = char()
          if (text[pos] === "-" && text[pos + 1] !== "]") {
            pos++
            ranges.push([lo, char()])
          } else ranges.push([lo, lo])
        }
        pos++
        node = { k: "cls", neg, ranges }
      } else if (c === "(") {
        pos++
        space(true)
        node = alternatives(true)
        space(true)
        if (text[pos] !== ")") return fail("expected )")
        pos++
      } else if (c !== undefined && /[a-zA-Z0-9-]/.test(c)) {
        node = { k: "ref", name: name() }
      } else break
      space(nested)
      for (;;) {
        const q = text[pos]
        if (q === "*") node = { k: "rep", node, min: 0, max: undefined }
        else if (q === "+") node = { k: "rep", node, min: 1, max: undefined }
        else if (q === "?") node = { k: "rep", node, min: 0, max: 1 }
        else if (q === "{") {
          const m = /^\{(\d+)(,(\d*))?\}/.exec(text.slice(pos))
          if (m === null) return fail("bad repetition")
          const min = Number(m[1])
          const max = m[2] === undefined ? min : m[3] === "" ? undefined : Number(m[3])
          node = { k: "rep", node, min, max }
          pos += m[0].length - 1
        } else break
        pos++
        space(nested)
      }
      items.push(node)
    }
    return items.length === 1 && items[0] !== undefined ? items[0] : { k: "seq", items }
  }
  space(true)
  while (pos < text.length && error === undefined) {
    const n = name()
    if (n === "") return { ok: false, error: `expected a rule name at ${pos}` }
    space(false)
    if (!text.startsWith("::=", pos)) return { ok: false, error: `expected ::= at ${pos}` }
    pos += 3
    space(true)
    if (rules.has(n)) return { ok: false, error: `rule ${n} defined twice` }
    rules.set(n, alternatives(false))
    space(true)
  }
  if (error !== undefined) return { ok: false, error }
  for (const node of rules.values()) {
    const missing = refsOf(node).find((r) => !rules.has(r))
    if (missing !== undefined) return { ok: false, error: `undefined rule ${missing}` }
  }
  if (!rules.has("root")) return { ok: false, error: "no root" }
  return { ok: true, grammar: rules }
}

const refsOf = (node: Node): ReadonlyArray<string> => {
  switch (node.k) {
    case "ref":
      return [node.name]
    case "alt":
      return node.opts.flatMap(refsOf)
    case "seq":
      return node.items.flatMap(refsOf)
    case "rep":
      return refsOf(node.node)
    default:
      return []
  }
}

const inClass = (node: { readonly neg: boolean; readonly ranges: ReadonlyArray<readonly [number, number]> }, cp: number) =>
  node.ranges.some(([lo, hi]) => cp >= lo && cp <= hi) !== node.neg

/** Whether the whole of `input` is derived from `root`. */
export const accepts = (grammar: Grammar, input: string): boolean => {
  const cps = Array.from(input, (c) => c.codePointAt(0) ?? 0)
  const memo = new Map<string, ReadonlySet<number>>()
  const match = (node: Node, at: number): ReadonlySet<number> => {
    switch (node.k) {
      case "lit": {
        for (let i = 0; i < node.cps.length; i++) if (cps[at + i] !== node.cps[i]) return new Set()
        return new Set([at + node.cps.length])
      }
      case "cls": {
        const cp = cps[at]
        return cp !== undefined && inClass(node, cp) ? new Set([at + 1]) : new Set()
      }
      case "ref": {
        const key = `${node.name}@${at}`
        const known = memo.get(key)
        if (known !== undefined) return known
        memo.set(key, new Set()) // a left-recursive re-entry matches nothing
        const body = grammar.get(node.name)
        const out = body === undefined ? new Set<number>() : match(body, at)
        memo.set(key, out)
        return out
      }
      case "alt": {
        const out = new Set<number>()
        for (const o of node.opts) for (const p of match(o, at)) out.add(p)
        return out
      }
      case "seq": {
        let frontier: ReadonlySet<number> = new Set([at])
        for (const item of node.items) {
          const next = new Set<number>()
          for (const p of frontier) for (const q of match(item, p)) next.add(q)
          frontier = next
          if (frontier.size === 0) break
        }
        return frontier
      }
      case "rep": {
        let frontier: ReadonlySet<number> = new Set([at])
        const out = new Set<number>()
        const seen = new Set<number>()
        for (let i = 0; node.max === undefined || i <= node.max; i++) {
          if (i >= node.min) {
            const fresh = [...frontier].filter((p) => !seen.has(p))
            for (const p of frontier) out.add(p)
            if (node.max === undefined && fresh.length === 0) break
            for (const p of fresh) seen.add(p)
          }
          if (frontier.size === 0) break
          const next = new Set<number>()
          for (const p of frontier) for (const q of match(node.node, p)) next.add(q)
          frontier = next
        }
        return out
      }
    }
  }
  const root = grammar.get("root")
  return root !== undefined && match(root, 0).has(cps.length)
}

/** A small deterministic random source (mulberry32). */
export const makeRandom = (seed: number): (() => number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// Characters a negated class is sampled from: ASCII, escapes' letters, non-ASCII in every UTF-8 width.
const PALETTE = Array.from(" !\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~\t\n\u007f\u00e9\u2028\u4e2d\u{1F600}abcxyz", (c) =>
  c.codePointAt(0) ?? 0
)

/** Minimal derivation heights of the rules (for ending a walk). */
const heights = (grammar: Grammar): ReadonlyMap<string, number> => {
  const h = new Map<string, number>([...grammar.keys()].map((k) => [k, Infinity]))
  const of = (node: Node): number => {
    switch (node.k) {
      case "lit":
      case "cls":
        return 0
      case "ref":
        return (h.get(node.name) ?? Infinity) + 1
      case "alt":
        return Math.min(...node.opts.map(of))
      case "seq":
        return Math.max(0, ...node.items.map(of))
      case "rep":
        return node.min === 0 ? 0 : of(node.node)
    }
  }
  for (let changed = true; changed;) {
    changed = false
    for (const [k, body] of grammar) {
      const v = of(body)
      if (v < (h.get(k) ?? Infinity)) {
        h.set(k, v)
        changed = true
      }
    }
  }
  return h
}

/** A random string of the grammar's language; past `maxDepth` rule calls it takes the shortest ways out. */
export const sample = (grammar: Grammar, random: () => number, maxDepth = 12): string => {
  const h = heights(grammar)
  const height = (node: Node): number =>
    node.k === "ref"
      ? (h.get(node.name) ?? Infinity) + 1
      : node.k === "alt"
      ? Math.min(...node.opts.map(height))
      : node.k === "seq"
      ? Math.max(0, ...node.items.map(height))
      : node.k === "rep"
      ? (node.min === 0 ? 0 : height(node.node))
      : 0
  const pick = <A>(xs: ReadonlyArray<A>): A | undefined => xs[Math.floor(random() * xs.length)]
  const out: Array<string> = []
  const walk = (node: Node, depth: number): void => {
    switch (node.k) {
      case "lit":
        out.push(String.fromCodePoint(...node.cps))
        return
      case "cls": {
        if (node.neg) {
          const cp = pick(PALETTE.filter((c) => inClass(node, c))) ?? 0x61
          out.push(String.fromCodePoint(cp))
          return
        }
        const [lo, hi] = pick(node.ranges) ?? [0x61, 0x61]
        let cp = lo + Math.floor(random() * (hi - lo + 1))
        if (cp >= 0xd800 && cp <= 0xdfff) cp = lo
        out.push(String.fromCodePoint(cp))
        return
      }
      case "ref": {
        const body = grammar.get(node.name)
        if (body !== undefined) walk(body, depth + 1)
        return
      }
      case "alt": {
        const opts = depth > maxDepth ? node.opts.filter((o) => height(o) === height(node)) : node.opts
        const o = pick(opts)
        if (o !== undefined) walk(o, depth)
        return
      }
      case "seq":
        for (const item of node.items) walk(item, depth)
        return
      case "rep": {
        const room = node.max === undefined ? 3 : node.max - node.min
        const extra = depth > maxDepth ? 0 : random() < 0.2 && room <= 40 ? room : Math.floor(random() * (Math.min(room, 4) + 1))
        for (let i = 0; i < node.min + extra; i++) walk(node.node, depth)
        return
      }
    }
  }
  const root = grammar.get("root")
  if (root !== undefined) walk(root, 0)
  return out.join("")
}
