import { accessSync, constants, existsSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import OpenAI from "openai"
import { afterAll, describe, expect, it } from "vitest"
import { defaultConfig } from "../../src/config/EdgeConfig.js"
import { type EdgeProcess, spawnServing } from "../support/edgeProcess.js"

/**
 * Set-up: with no configuration at all `npm start` serves the echo model on 127.0.0.1:8080; README and .ci/run.
 * No test needs port 8080 free: `npm start` runs here as `npm start -- --port 0` would, after its build.
 */

const ROOT = fileURLToPath(new URL("../../", import.meta.url))

const join = (relative: string): string => `${ROOT}${relative}`

describe("set-up", () => {
  let edge: EdgeProcess | undefined
  afterAll(async () => {
    await edge?.stop()
  })

  it("with no config file, flag or IOP_CONFIG the edge serves the echo model on 127.0.0.1, port 8080 by default", async () => {
    // What the binary serves with no file: the embedded default (src/bin/main.ts).
    expect(defaultConfig().server).toMatchObject({ host: "127.0.0.1", port: 8080 })
    expect(defaultConfig().models.map((m) => m.id)).toEqual(["echo"])

    // `npm start` is the build, then the command that serves; `npm start -- --port 0` appends the flag to it.
    const start: string = JSON.parse(readFileSync(join("package.json"), "utf8")).scripts.start
    const steps = start.split("&&").map((step) => step.trim())
    expect(steps.slice(0, -1), start).toEqual(["npm run build --silent"])
    const serve = steps[steps.length - 1]!
    expect(serve).toMatch(/^node dist\/bin\/main\.js edge$/)
    const env: NodeJS.ProcessEnv = { ...process.env }
    delete env["IOP_CONFIG"]
    edge = await spawnServing("sh", ["-c", `exec ${serve} --port 0`], env, `npm start -- --port 0 (${serve} --port 0)`, undefined, ROOT)
    expect(edge.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)

    const client = new OpenAI({ baseURL: edge.baseURL, apiKey: "x", maxRetries: 0 })
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(["echo"])
    const stream = await client.chat.completions.create({
      model: "echo",
      stream: true,
      messages: [{ role: "user", content: "Hello from a fresh machine" }]
    })
    let text = ""
    for await (const c of stream) text += c.choices[0]?.delta.content ?? ""
    expect(text).toBe("Hello from a fresh machine")
  })

  it("the README documents `npm ci && npm start` and `npm ci && npm test`", () => {
    const readme = join("README.md")
    expect(existsSync(readme), `${readme} exists`).toBe(true)
    const text = readFileSync(readme, "utf8")
    expect(text).toMatch(/npm ci && npm start/)
    expect(text).toMatch(/npm ci && npm test/)
  })

  it(".ci/run is executable and runs the README's test command", () => {
    const run = join(".ci/run")
    expect(existsSync(run), `${run} exists`).toBe(true)
    accessSync(run, constants.X_OK)
    expect(readFileSync(run, "utf8")).toMatch(/npm test/)
  })
})
