import { describe, expect, it } from "vitest"
import { readFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { readSurface } from "./publicSurface.js"

const DIST = resolve(import.meta.dirname, "../../dist")
const ENTRY_POINTS = ["index.d.ts", "nats.d.ts", "testing.d.ts", "ai.d.ts"]

/**
 * The public surface by decision (docs/library.md, "The public surface"): the modules each entry point exports.
 * Anything else is internal: not exported, and no public signature names a type a user could not name.
 */
const DECIDED: Record<string, ReadonlyArray<string>> = {
  "index.d.ts": [
    "ApiKeySourceError", "ChatCompletion", "ChatCompletionChunk", "ChatCompletionRequest", "ChatCompletions",
    "ChatErrors", "EchoProvider", "Edge", "EdgeConfig", "EdgeErrors", "LoadConfig", "LocalNode", "Metrics",
    "ModelOptions", "NodeRegistry", "OpenAiProvider", "Provider", "ResponseStore", "RunErrors", "RunEvent", "RunOutcomeError",
    "RunService", "RunSink", "SubmitError", "SubmitRunRequest"
  ],
  "nats.d.ts": [
    "BusConfig", "BusConnectFailed", "NodeProvider", "NodeSettings", "layerEdge", "layerNode", "layerResponseStore", "layerServer"
  ],
  "testing.d.ts": [
    "ErrorResponse", "RecordingSink", "RunState", "ScriptedModels", "ScriptedProvider", "ScriptedProviderOptions",
    "ScriptedRun", "ScriptedRunService", "ServerLayer", "SseEvent", "Step", "TestEdge", "TestServer",
    "layerEchoModel", "runRequest", "sseEvents"
  ],
  "ai.d.ts": ["Config", "layer", "make"]
}

describe("the package's public surface", () => {
  const surface = readSurface(DIST, ENTRY_POINTS)

  it("each entry point exports the modules and names the decision lists, and nothing else", () => {
    for (const entry of ENTRY_POINTS) {
      const top = [...new Set((surface.exports.get(entry) ?? []).map((name) => name.split(".")[0] ?? name))].sort()
      expect({ entry, top }).toEqual({ entry, top: [...(DECIDED[entry] ?? [])].sort() })
    }
  })

  it("no public signature names a type of the package that no entry point exports", () => {
    expect(surface.forgotten).toEqual([])
  })

  it("one layer-naming rule: every public layer (or function returning one) is `layer` or `layerX`", () => {
    expect(surface.layers.length).toBeGreaterThan(20)
    expect(surface.layers.filter((name) => !/^layer([A-Z]\w*)?$/.test(name.split(".").at(-1) ?? ""))).toEqual([])
  })
})

describe("the package's entry points", () => {
  it("the root entry point (and the test kit) loads neither the NATS client, the CLI nor @effect/ai", () => {
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
    // The walk sees what it is for: iop-edge/ai's own imports do name @effect/ai.
    expect(readFileSync(join(DIST, "ai/EdgeLanguageModel.js"), "utf8")).toMatch(/from "@effect\/ai\/LanguageModel"/)
    expect(Array.from(external).filter((s) => /^(@nats-io|@effect\/cli|@effect\/ai)/.test(s))).toEqual([])
  })
})
