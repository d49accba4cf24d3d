import { accessSync, constants, existsSync, readFileSync } from "node:fs"
import { createConnection } from "node:net"
import { fileURLToPath } from "node:url"
import OpenAI from "openai"
import { afterAll, describe, expect, it } from "vitest"
import { type EdgeProcess, startEdge } from "../support/edgeProcess.js"

/** Set-up: with no configuration at all the edge serves the echo model on 127.0.0.1:8080; README and .ci/run. */

const ROOT = fileURLToPath(new URL("../../", import.meta.url))

const portInUse = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port })
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
  })

describe("set-up", () => {
  let edge: EdgeProcess | undefined
  afterAll(async () => {
    await edge?.stop()
  })

  it("with no config file, flag or IOP_CONFIG the edge listens on http://127.0.0.1:8080 and streams the echo model", async () => {
    expect(await portInUse(8080), "port 8080 must be free for this test").toBe(false)
    edge = await startEdge({ ephemeralPort: false })
    expect(edge.url).toBe("http://127.0.0.1:8080")
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

const join = (relative: string): string => `${ROOT}${relative}`
