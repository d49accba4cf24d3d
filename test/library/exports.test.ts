import { describe, expect, it } from "vitest"
import { existsSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"

const DIST = resolve(import.meta.dirname, "../../dist")
const ENTRY_POINTS = ["index.d.ts", "nats.d.ts", "testing.d.ts"]

/** The declaration files an entry point re-exports, transitively (`export * from`, `export { … } from`). */
const exportedFiles = (): Set<string> => {
  const seen = new Set<string>()
  const walk = (file: string) => {
    if (seen.has(file) || !existsSync(file)) return
    seen.add(file)
    const text = readFileSync(file, "utf8")
    for (const m of text.matchAll(/export\s+(?:type\s+)?(?:\*|\{[^}]*\}|\*\s+as\s+\w+)\s+from\s+["'](\.[^"']+)["']/g)) {
      walk(resolve(dirname(file), (m[1] ?? "").replace(/\.js$/, ".d.ts")))
    }
  }
  for (const entry of ENTRY_POINTS) walk(join(DIST, entry))
  return seen
}

describe("the package's public types", () => {
  it("every module a public declaration refers to is exported by an entry point (its types can be named)", () => {
    const exported = exportedFiles()
    expect(exported.size).toBeGreaterThan(40)
    const unreachable: Array<string> = []
    for (const file of exported) {
      for (const m of readFileSync(file, "utf8").matchAll(/(?:import\(|from\s+)["'](\.[^"']+)["']/g)) {
        const target = resolve(dirname(file), (m[1] ?? "").replace(/\.js$/, ".d.ts"))
        if (!exported.has(target)) unreachable.push(`${relative(DIST, target)} (named by ${relative(DIST, file)})`)
      }
    }
    expect(unreachable).toEqual([])
  })

  it("the root entry point does not load the NATS client or the CLI", () => {
    const seen = new Set<string>()
    const external = new Set<string>()
    const walk = (file: string) => {
      if (seen.has(file)) return
      seen.add(file)
      const code = readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\//g, "")
      for (const m of code.matchAll(/^(?:import|export)[^'"\n]*?(?:from\s*)?["']([^"']+)["']/gm)) {
        const spec = m[1] ?? ""
        if (spec.startsWith(".")) walk(resolve(dirname(file), spec))
        else external.add(spec)
      }
    }
    walk(join(DIST, "index.js"))
    walk(join(DIST, "testing.js"))
    expect(Array.from(external).filter((s) => s.startsWith("@nats-io") || s.startsWith("@effect/cli"))).toEqual([])
  })
})
