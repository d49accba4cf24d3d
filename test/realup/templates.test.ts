import { existsSync, readdirSync, readFileSync } from "node:fs"
import { homedir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { formatsOfTemplate } from "../../src/protocol/templateFormats.js"

/**
 * `toolFormats: "auto"` over the chat templates llama.cpp ships (models/templates of the source that
 * scripts/realup/setup.sh unpacks): how many tool-capable ones it recognises. Printed, and held at today's count.
 */
const home = process.env["REALUP_HOME"] ?? join(process.env["XDG_CACHE_HOME"] ?? join(homedir(), ".cache"), "iop-realup")
const DIR = join(home, "work", "llama.cpp", "models", "templates")

describe("the chat templates of llama.cpp's models/templates", () => {
  it("are recognised by toolFormats: \"auto\" (55 of 65 tool-capable ones)", () => {
    expect(existsSync(DIR)).toBe(true)
    const rows = readdirSync(DIR).filter((f) => f.endsWith(".jinja")).sort().map((file) => {
      const text = readFileSync(join(DIR, file), "utf8")
      return { file, tools: /\btools?\b|tool_calls/.test(text), formats: formatsOfTemplate(text) }
    })
    const capable = rows.filter((r) => r.tools)
    const recognised = capable.filter((r) => r.formats !== undefined)
    console.log(
      `toolFormats auto: ${recognised.length} of ${capable.length} tool-capable templates recognised\n` +
        rows.map((r) => `  ${r.tools ? "T" : " "} ${r.file}: ${r.formats?.join(",") ?? "—"}`).join("\n")
    )
    expect(capable.length).toBeGreaterThanOrEqual(60)
    expect(recognised.length).toBeGreaterThanOrEqual(55)
    expect(rows.find((r) => r.file === "openai-gpt-oss-120b.jinja")?.formats).toContain("harmony")
    expect(rows.find((r) => r.file === "Qwen3-Coder.jinja")?.formats).toContain("qwen3_xml")
  })
})
