import { describe, expect, it } from "vitest"
import { execFile } from "node:child_process"
import { cpSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { promisify } from "node:util"

const exec = promisify(execFile)
/** A command whose failure message carries its output (a type error, a failed test), not just its exit code. */
const run = (file: string, args: ReadonlyArray<string>, options: { readonly cwd?: string } = {}) =>
  exec(file, args, { ...options, env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" }, maxBuffer: 16 * 1024 * 1024 }).catch((e: { stdout?: string; stderr?: string; message: string }) => {
    return Promise.reject(new Error(`${file} ${args.join(" ")} failed: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`.slice(0, 8000)))
  })
const ROOT = resolve(import.meta.dirname, "../..")

/**
 * `examples/app` as a user has it: the packed tarball installed beside `effect@3` in a folder of its own (from
 * npm's cache, which the project's own install filled: no network needed), type-checked under strict +
 * `exactOptionalPropertyTypes` + `skipLibCheck: false`, and its own tests run with its own vitest.
 */
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
      await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: app })

      const files = (await run("tar", ["-tzf", join(dir, tarball)])).stdout.split("\n")
      expect(files.some((f) => f.startsWith("package/test/") || f.startsWith("package/bench/"))).toBe(false)
      expect(files.some((f) => f.endsWith(".map"))).toBe(false)

      const ls = await run("npm", ["ls", "effect", "--all", "--parseable"], { cwd: app })
      const copies = new Set(ls.stdout.trim().split("\n").filter((l) => l.endsWith("/node_modules/effect")))
      expect(Array.from(copies)).toEqual([join(app, "node_modules/effect")])
      expect(readdirSync(join(app, "node_modules/iop-edge"))).not.toContain("node_modules")

      await run("npx", ["tsc", "-p", "."], { cwd: app })
      const tests = await run("npx", ["vitest", "run", "--reporter=dot"], { cwd: app })
      expect(tests.stdout).toMatch(/Tests\s+3 passed/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
