/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`): self time per
 * function and per package. As a script: `node dist-bench/bench/profile.js FILE [TOP]`.
 */
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
}

interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
  readonly children?: ReadonlyArray<number>
}

interface CpuProfile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

export interface SelfTime {
  readonly name: string
  readonly ms: number
  /** Share of the non-idle time. */
  readonly share: number
}

export interface ProfileSummary {
  readonly busyMs: number
  readonly idleMs: number
  readonly functions: ReadonlyArray<SelfTime>
  readonly packages: ReadonlyArray<SelfTime>
  /** Each busy sample billed to the innermost edge-source function on its stack: which of our code drives the cost. */
  readonly byEdgeFrame: ReadonlyArray<SelfTime>
  /** Time with the function anywhere on the stack (edge source only). */
  readonly edgeInclusive: ReadonlyArray<SelfTime>
}

/** Where a function lives: a package under node_modules, node's own modules, the edge's source, or V8 itself. */
const packageOf = (url: string): string => {
  if (url === "") return "(v8/native)"
  if (url.startsWith("node:")) return "node:internal"
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (modules !== null) return modules[1] ?? url
  const source = /\/dist(?:-bench)?\/(?:src\/)?([^/]+)\//.exec(url)
  return source !== null ? `edge src/${source[1]}` : url
}

const isEdgeSource = (url: string): boolean => /\/dist(-bench)?\/src\//.test(url)

const place = (frame: CallFrame): string => {
  const file = frame.url.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*\/dist(-bench)?\//, "")
  return file === "" ? "" : ` ${file}:${frame.lineNumber + 1}`
}

const nameOf = (frame: CallFrame): string => `${frame.functionName || "(anonymous)"}${place(frame)}`

const top = (totals: Map<string, number>, busyMs: number, count: number): ReadonlyArray<SelfTime> =>
  [...totals.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, ms]) => ({ name, ms, share: ms / busyMs }))

export const summarise = (file: string, count = 25): ProfileSummary => {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parentOf = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id)
  const functions = new Map<string, number>()
  const packages = new Map<string, number>()
  const byEdgeFrame = new Map<string, number>()
  const edgeInclusive = new Map<string, number>()
  const add = (totals: Map<string, number>, key: string, ms: number) => totals.set(key, (totals.get(key) ?? 0) + ms)
  let busyMs = 0
  let idleMs = 0
  // timeDeltas[i] is the time since the previous sample; bill it to sample i.
  profile.samples.forEach((id, i) => {
    const ms = (profile.timeDeltas[i] ?? 0) / 1000
    const frame = byId.get(id)?.callFrame
    if (frame === undefined) return
    if (frame.functionName === "(idle)") {
      idleMs += ms
      return
    }
    busyMs += ms
    add(functions, nameOf(frame), ms)
    add(packages, frame.functionName.startsWith("(") ? frame.functionName : packageOf(frame.url), ms)
    const seen = new Set<string>()
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
      const caller = byId.get(at)?.callFrame
      if (caller === undefined || !isEdgeSource(caller.url)) continue
      const name = nameOf(caller)
      if (seen.size === 0) add(byEdgeFrame, name, ms)
      if (!seen.has(name)) add(edgeInclusive, name, ms)
      seen.add(name)
    }
    if (seen.size === 0) add(byEdgeFrame, "(no edge frame on the stack)", ms)
  })
  return {
    busyMs,
    idleMs,
    functions: top(functions, busyMs, count),
    packages: top(packages, busyMs, count),
    byEdgeFrame: top(byEdgeFrame, busyMs, count),
    edgeInclusive: top(edgeInclusive, busyMs, count)
  }
}

export const formatSummary = (summary: ProfileSummary): string => {
  const line = (s: SelfTime) => `${s.ms.toFixed(0).padStart(8)} ms ${(100 * s.share).toFixed(1).padStart(5)}%  ${s.name}`
  return [
    `busy ${summary.busyMs.toFixed(0)} ms, idle ${summary.idleMs.toFixed(0)} ms`,
    "self time by package:",
    ...summary.packages.map(line),
    "top functions by self time:",
    ...summary.functions.map(line),
    "busy time by innermost edge-source frame on the stack:",
    ...summary.byEdgeFrame.map(line),
    "edge-source functions by inclusive time:",
    ...summary.edgeInclusive.map(line)
  ].join("\n")
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.argv[2]
  if (file === undefined) {
    console.error("usage: node dist-bench/bench/profile.js FILE.cpuprofile [TOP]")
    process.exit(2)
  }
  console.log(formatSummary(summarise(file, Number(process.argv[3] ?? "25"))))
}
