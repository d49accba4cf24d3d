import { describe, expect, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import { build } from "esbuild"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { GENERATION_SCHEMAS } from "../../../src/chat/toolcalls/validate.js"

const decodeResult = Schema.decodeUnknownSync(
  Schema.Struct({ invalid: Schema.Number, validators: Schema.Number, generation: Schema.Number })
)

const SCRIPT = fileURLToPath(new URL("./compileMany.script.ts", import.meta.url))

interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs `code` (an ES module) in a fresh `node` with `execArgv`, feeding it on stdin. */
const runNode = (code: string, execArgv: ReadonlyArray<string>, env: Record<string, string>): Promise<Exit> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...execArgv, "--input-type=module"], {
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d.slice(0, 4096)))
    child.on("error", reject)
    child.on("close", (exitCode, signal) => resolve({ code: exitCode, signal, stdout, stderr }))
    child.stdin.end(code)
  })

describe("compiled-schema memory", () => {
  it("10,000 distinct strict schemas validate in a node with a 96 MiB heap (no OOM)", async () => {
    // The script and the validator, with ajv and re2js, as one module: the child runs plain JavaScript.
    const bundle = await build({
      entryPoints: [SCRIPT],
      bundle: true,
      platform: "node",
      format: "esm",
      write: false,
      logLevel: "silent"
    })
    const code = bundle.outputFiles[0]?.text ?? ""
    const exit = await runNode(code, ["--max-old-space-size=96"], { COUNT: "10000", SIZE: "8000" })
    expect({ code: exit.code, signal: exit.signal, stderr: exit.stderr }).toEqual({ code: 0, signal: null, stderr: "" })
    const { generation, invalid, validators } = decodeResult(JSON.parse(exit.stdout))
    expect(invalid).toBe(0)
    expect(validators).toBeLessThanOrEqual(GENERATION_SCHEMAS)
    expect(generation).toBeGreaterThan(10_000 / GENERATION_SCHEMAS)
  }, 180_000)
})
