/**
 * What a heap grew by, per constructor: `node dist-bench/bench/heapDiff.js BEFORE AFTER [N]`
 * divides by N (e.g. the streams opened between the two snapshots). Take the
 * snapshots with `node --heapsnapshot-signal=SIGUSR2 ...` and `kill -USR2 PID`
 * (or let bench/heapCount.ts take them). As a module: the parsing.
 */
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

interface Snapshot {
  readonly snapshot: { readonly meta: { readonly node_fields: ReadonlyArray<string>; readonly node_types: ReadonlyArray<unknown> } }
  readonly nodes: ReadonlyArray<number>
  readonly strings: ReadonlyArray<string>
}

export interface Entry {
  readonly size: number
  readonly count: number
}

/** Self size and count per `kind: name` (kind = the node type: object, closure, string, …; name = constructor or function). */
export type Tally = ReadonlyMap<string, Entry>

export const tally = (file: string): Tally => {
  const s = JSON.parse(readFileSync(file, "utf8")) as Snapshot
  const fields = s.snapshot.meta.node_fields
  const types = s.snapshot.meta.node_types[0] as ReadonlyArray<string>
  const [type, name, size] = [fields.indexOf("type"), fields.indexOf("name"), fields.indexOf("self_size")]
  const totals = new Map<string, { size: number; count: number }>()
  for (let i = 0; i < s.nodes.length; i += fields.length) {
    const kind = types[s.nodes[i + type] ?? 0] ?? "?"
    const label = kind.includes("string") ? "(string)" : kind === "code" ? "(code)" : s.strings[s.nodes[i + name] ?? 0] ?? ""
    const key = `${kind}: ${label}`.slice(0, 90)
    const entry = totals.get(key) ?? { size: 0, count: 0 }
    entry.size += s.nodes[i + size] ?? 0
    entry.count += 1
    totals.set(key, entry)
  }
  return totals
}

export interface DiffRow extends Entry {
  readonly key: string
}

/** `after` − `before` per key, divided by `per`, largest growth in bytes first. */
export const diff = (before: Tally, after: Tally, per = 1): ReadonlyArray<DiffRow> => {
  const keys = new Set([...before.keys(), ...after.keys()])
  return [...keys]
    .map((key) => {
      const a = after.get(key) ?? { size: 0, count: 0 }
      const b = before.get(key) ?? { size: 0, count: 0 }
      return { key, size: (a.size - b.size) / per, count: (a.count - b.count) / per }
    })
    .sort((x, y) => y.size - x.size)
}

/** The sum of a diff's rows whose key passes `keep` (all rows without it). */
export const total = (rows: ReadonlyArray<DiffRow>, keep: (key: string) => boolean = () => true): Entry =>
  rows.filter((r) => keep(r.key)).reduce((t, r) => ({ size: t.size + r.size, count: t.count + r.count }), { size: 0, count: 0 })

const cli = () => {
  const [beforeFile, afterFile, perArg] = process.argv.slice(2)
  if (beforeFile === undefined || afterFile === undefined) {
    process.stderr.write("usage: node dist-bench/bench/heapDiff.js BEFORE.heapsnapshot AFTER.heapsnapshot [N]\n")
    process.exit(2)
  }
  const rows = diff(tally(beforeFile), tally(afterFile), Number(perArg ?? "1"))
  const sum = total(rows)
  process.stdout.write(`grew ${(sum.size / 1024).toFixed(1)} KiB and ${sum.count.toFixed(0)} objects per unit\n`)
  for (const r of rows.slice(0, 30)) {
    process.stdout.write(`${(r.size / 1024).toFixed(2).padStart(9)} KiB ${r.count.toFixed(1).padStart(8)} objects  ${r.key}\n`)
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) cli()
