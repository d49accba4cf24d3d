import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, normalize, relative, sep } from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"
import { describe, expect, it } from "vitest"

/**
 * The planes form a stack (docs/architecture.md): over `src/`, value and type imports alike, no two top-level
 * folders import each other through any path, and no two files do. Imports are read by TypeScript's own
 * pre-processor (every `import`, `import type`, `export … from` and `import()`).
 */

const SRC = fileURLToPath(new URL("../../src/", import.meta.url))

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return entry.name.endsWith(".ts") ? [path] : []
  })

/** Every file's project imports, as paths relative to `src/`. */
const importGraph = (): Map<string, Set<string>> => {
  const graph = new Map<string, Set<string>>()
  for (const file of sourceFiles(SRC)) {
    const from = relative(SRC, file)
    const targets = new Set<string>()
    for (const ref of ts.preProcessFile(readFileSync(file, "utf8"), true, true).importedFiles) {
      if (!ref.fileName.startsWith(".")) continue
      targets.add(normalize(join(dirname(from), ref.fileName)).replace(/\.js$/, ".ts"))
    }
    graph.set(from, targets)
  }
  return graph
}

/** Strongly connected components with more than one member (Tarjan). */
const cycles = (graph: ReadonlyMap<string, ReadonlySet<string>>): Array<Array<string>> => {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const found: Array<Array<string>> = []
  let next = 0
  const visit = (v: string): void => {
    index.set(v, next)
    low.set(v, next)
    next++
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) !== index.get(v)) return
    const component: Array<string> = []
    for (;;) {
      const w = stack.pop()!
      onStack.delete(w)
      component.push(w)
      if (w === v) break
    }
    if (component.length > 1) found.push(component.sort())
  }
  for (const v of graph.keys()) if (!index.has(v)) visit(v)
  return found
}

/** The top-level folder (plane) of a file under `src/`, or the file itself for the entry points at the top. */
const plane = (file: string): string => file.split(sep)[0] ?? file

describe("the planes form a stack", () => {
  const files = importGraph()

  it("reads the imports (a sanity check of the reader itself)", () => {
    expect(files.size).toBeGreaterThan(50)
    expect(files.get(join("run", "RunService.ts"))).toContain(join("run", "NodeRegistry.ts"))
    // Type-only imports count too.
    expect(files.get(join("chat", "runReport.ts"))).toContain(join("observability", "Metrics.ts"))
  })

  it("no file cycle", () => {
    expect(cycles(files)).toEqual([])
  })

  it("no folder cycle between src/'s top-level folders", () => {
    const folders = new Map<string, Set<string>>()
    for (const [from, targets] of files) {
      const edges = folders.get(plane(from)) ?? new Set<string>()
      for (const target of targets) if (plane(target) !== plane(from)) edges.add(plane(target))
      folders.set(plane(from), edges)
    }
    expect(cycles(folders)).toEqual([])
  })

  it("the ground (protocol/) and common/ import nothing else of the project", () => {
    const outside = Array.from(files).flatMap(([from, targets]) =>
      ["protocol", "common"].includes(plane(from))
        ? Array.from(targets).filter((t) => !["protocol", "common"].includes(plane(t))).map((t) => `${from} -> ${t}`)
        : []
    )
    expect(outside).toEqual([])
  })
})
