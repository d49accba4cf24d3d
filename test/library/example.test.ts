import { describe, expect, it } from "vitest"
import { execFile } from "node:child_process"
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import { startNatsServer } from "../support/natsServer.js"

const exec = promisify(execFile)
/** A command whose failure message carries its output (a type error, a failed test), not just its exit code. */
const run = (
  file: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd?: string; readonly env?: Readonly<Record<string, string>> } = {}
) =>
  exec(file, args, { cwd: options.cwd, env: { ...process.env, ...options.env, NO_COLOR: "1", FORCE_COLOR: "0" }, maxBuffer: 16 * 1024 * 1024 }).catch((e: { stdout?: string; stderr?: string; message: string }) => {
    return Promise.reject(new Error(`${file} ${args.join(" ")} failed: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`.slice(0, 8000)))
  })
const ROOT = resolve(import.meta.dirname, "../..")

/**
 * `examples/app` as a user has it: the packed tarball installed beside `effect@3` in a folder of its own (from
 * npm's cache, which the project's own install filled: no network needed), type-checked under strict +
 * `exactOptionalPropertyTypes` + `skipLibCheck: false`, and its own tests run with its own vitest.
 */
/**
 * The `ts` blocks of the installed package's `docs/library.md`, as files of the app: a block that imports
 * `@effect/vitest` is a test of its own; every other one is a module that a generated test imports (running its
 * top level) and whose exported `program`, if any, it runs. Returns how many blocks there were.
 */
const writeDocSnippets = (app: string): number => {
  const doc = readFileSync(join(app, "node_modules/iop-edge/docs/library.md"), "utf8")
  const blocks = Array.from(doc.matchAll(/```ts\n([\s\S]*?)```/g), (m) => m[1] ?? "")
  const dir = join(app, "docs-snippets")
  mkdirSync(dir)
  const modules: Array<string> = []
  blocks.forEach((code, i) => {
    const isTest = code.includes('from "@effect/vitest"')
    const name = `snippet-${i + 1}`
    writeFileSync(join(dir, isTest ? `${name}.test.ts` : `${name}.ts`), code)
    if (!isTest) modules.push(name)
  })
  const runner = [
    'import { expect, it } from "@effect/vitest"',
    'import * as Effect from "effect/Effect"',
    ...modules.map((name) => `import * as ${name.replace("-", "_")} from "./${name}.js"`),
    ...modules.map((name) => {
      const ns = name.replace("-", "_")
      return `it.live("docs/library.md ${name} loads and runs", () => Effect.gen(function* () {
  const exported: Record<string, unknown> = { ...${ns} }
  expect(Object.keys(exported).length).toBeGreaterThan(0)
  const program = exported["program"]
  if (Effect.isEffect(program)) yield* (program as Effect.Effect<unknown, unknown>)
}))`
    })
  ].join("\n")
  writeFileSync(join(dir, "snippets.test.ts"), runner)
  return blocks.length
}

/** The `npm i` lines of the doc's install block, as argument lists (`["i", "iop-edge", "effect@^3…"]`). */
const installLines = (doc: string): ReadonlyArray<ReadonlyArray<string>> => {
  const block = /```sh\n([\s\S]*?)```/.exec(doc)?.[1] ?? ""
  const lines = block.split("\n").map((l) => l.replace(/#.*$/, "").trim()).filter((l) => l.startsWith("npm i "))
  return lines.map((l) => l.split(/\s+/).slice(1))
}

describe("examples/app against the packed tarball", () => {
  it("installs one Effect, type-checks strictly and passes its own tests", { timeout: 240_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "iop-example-"))
    try {
      // `npm pack` ships what `files` says: dist (built by `npm test` before the tests run), docs, README, LICENSE.
      const packed = await run("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: ROOT })
      const tarball = packed.stdout.trim().split("\n").at(-1) ?? ""
      expect(tarball).toMatch(/^iop-edge-.*\.tgz$/)
      cpSync(join(dir, tarball), join(dir, "iop-edge.tgz"))
      const app = join(dir, "app")
      cpSync(join(ROOT, "examples/app"), app, { recursive: true, filter: (src) => !src.includes("node_modules") })
      // What docs/library.md says to install, as it says it (the package itself from the tarball); the app's own
      // package.json names only its other tools.
      for (const line of installLines(readFileSync(join(ROOT, "docs/library.md"), "utf8"))) {
        const args = line.map((arg) => (arg === "iop-edge" ? join(dir, "iop-edge.tgz") : arg))
        await run("npm", [...args, "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: app })
      }

      const files = (await run("tar", ["-tzf", join(dir, tarball)])).stdout.split("\n")
      expect(files.some((f) => f.startsWith("package/test/") || f.startsWith("package/bench/"))).toBe(false)
      expect(files.some((f) => f.endsWith(".map"))).toBe(false)

      const ls = await run("npm", ["ls", "effect", "--all", "--parseable"], { cwd: app })
      const copies = new Set(ls.stdout.trim().split("\n").filter((l) => l.endsWith("/node_modules/effect")))
      expect(Array.from(copies)).toEqual([join(app, "node_modules/effect")])
      expect(readdirSync(join(app, "node_modules/iop-edge"))).not.toContain("node_modules")

      const snippets = writeDocSnippets(app)
      expect(snippets).toBeGreaterThanOrEqual(6)

      await run("npx", ["tsc", "-p", "."], { cwd: app })
      // The NATS block runs against a real nats-server.
      const nats = await startNatsServer()
      const tests = await run("npx", ["vitest", "run", "--reporter=dot"], { cwd: app, env: { NATS_URL: nats.url } })
        .finally(() => nats.stop())
      expect(tests.stdout).not.toMatch(/failed/)
      // The app's own 7 tests, the docs' test snippet, and one run per other snippet.
      expect(Number(/Tests\s+(\d+) passed/.exec(tests.stdout)?.[1])).toBe(7 + snippets)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
