/**
 * What a heap grew by, per constructor: `node dist-bench/bench/heapDiff.js BEFORE AFTER [N]`
 * divides by N (e.g. the streams opened between the two snapshots). Take the
 * snapshots with `node --heapsnapshot-signal=SIGUSR2 ...` and `kill -USR2 PID`.
 */
import { readFileSync } from "node:fs"

interface Snapshot {
  readonly snapshot: { readonly meta: { readonly node_fields: ReadonlyArray<string>; readonly node_types: ReadonlyArray<unknown> } }
  readonly nodes: ReadonlyArray<number>
  readonly strings: ReadonlyArray<string>
}

const tally = (file: string) => {
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

const [beforeFile, afterFile, perArg] = process.argv.slice(2)
if (beforeFile === undefined || afterFile === undefined) {
  process.stderr.write("usage: node dist-bench/bench/heapDiff.js BEFORE.heapsnapshot AFTER.heapsnapshot [N]\n")
  process.exit(2)
}
const per = Number(perArg ?? "1")
const before = tally(beforeFile)
const after = tally(afterFile)
const rows = [...after.entries()].map(([key, a]) => {
  const b = before.get(key) ?? { size: 0, count: 0 }
  return { key, size: (a.size - b.size) / per, count: (a.count - b.count) / per }
})
const total = rows.reduce((t, r) => ({ size: t.size + r.size, count: t.count + r.count }), { size: 0, count: 0 })
process.stdout.write(`grew ${(total.size / 1024).toFixed(1)} KiB and ${total.count.toFixed(0)} objects per unit\n`)
for (const r of rows.sort((x, y) => y.size - x.size).slice(0, 30)) {
  process.stdout.write(`${(r.size / 1024).toFixed(2).padStart(9)} KiB ${r.count.toFixed(1).padStart(8)} objects  ${r.key}\n`)
}
