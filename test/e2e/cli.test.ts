import { createServer } from "node:net"
import OpenAI from "openai"
import { afterAll, describe, expect, it } from "vitest"
import { type EdgeProcess, runIop, startEdge, writeTempFile } from "../support/edgeProcess.js"

/** `iop edge` flags and environment, bad config files (exit 2, one message naming file and JSON path), `iop config`. */

const freePort = async (): Promise<number> => {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

const modelIds = async (edge: EdgeProcess): Promise<Array<string>> => {
  const client = new OpenAI({ baseURL: edge.baseURL, apiKey: "x", maxRetries: 0 })
  return (await client.models.list()).data.map((m) => m.id)
}

const echoModelConfig = (id: string) => ({ id, provider: { type: "echo", tokenDelayMs: 0 } })

/** The example config of the contract, verbatim. */
const CONTRACT_EXAMPLE = {
  server: { host: "127.0.0.1", port: 8080, apiKeys: ["sk-local-1"] },
  runs: { idleTimeoutMs: 60000, toolValidationAttempts: 2 },
  models: [
    { id: "echo", provider: { type: "echo" } },
    {
      id: "qwen",
      provider: { type: "openai", baseUrl: "http://127.0.0.1:11434/v1", model: "qwen2.5:7b-instruct", apiKey: "optional" },
      tools: "native",
      output: { strict: false, streamBuffer: false, xmlCompletionTool: null }
    }
  ]
}

describe.concurrent("iop edge command line", () => {
  const edges: Array<EdgeProcess> = []
  afterAll(async () => {
    await Promise.all(edges.map((edge) => edge.stop()))
  })
  const started = (edge: EdgeProcess) => {
    edges.push(edge)
    return edge
  }

  // One edge for two tests: its file comes from IOP_CONFIG and names a host and port it could
  // not listen on; the flags fix both.
  let envEdge: Promise<{ edge: EdgeProcess; port: number }> | undefined
  const startEnvEdge = () =>
    (envEdge ??= (async () => {
      const port = await freePort()
      const edge = await startEdge({
        config: { server: { host: "192.0.2.1", port: 1 }, models: [echoModelConfig("from-env-file")] },
        configVia: "env",
        args: ["--host", "127.0.0.1", "--port", String(port)]
      })
      return { edge: started(edge), port }
    })())

  it("IOP_CONFIG names the config file when --config is absent", async () => {
    const { edge } = await startEnvEdge()
    expect(await modelIds(edge)).toEqual(["from-env-file"])
  })

  it("--port and --host override server.port and server.host of the file", async () => {
    const { edge, port } = await startEnvEdge()
    expect(edge.url).toBe(`http://127.0.0.1:${port}`)
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200)
  })

  it("--config wins over IOP_CONFIG", async () => {
    const envFile = writeTempFile({ models: [echoModelConfig("env-model")] })
    const edge = started(await startEdge({ config: { models: [echoModelConfig("flag-model")] }, env: { IOP_CONFIG: envFile } }))
    expect(await modelIds(edge)).toEqual(["flag-model"])
  })

  // Bad config files stop the edge before it listens: exit 2, one message naming the file and the JSON path.
  /** Runs `iop edge --config FILE --port 0` on `content`; returns the result and the file. */
  const edgeWith = async (content: string | object) => {
    const file = writeTempFile(content)
    const result = await runIop(["edge", "--config", file, "--port", "0"])
    expect(result.listened, result.stdout).toBe(false)
    expect(result.code, result.stderr).toBe(2)
    const message = result.stderr.trim()
    // One message (one line), naming the file.
    expect(message.split("\n"), message).toHaveLength(1)
    expect(message).toContain(file)
    return { message, file }
  }

  it("a bad config: a file that is not JSON", async () => {
    const { message } = await edgeWith("{ \"server\": { port: 8080 ")
    expect(message).toMatch(/JSON/)
  })

  it("a bad config: an unknown key: {\"server\":{\"prot\":1}} names $.server.prot", async () => {
    const { message } = await edgeWith({ server: { prot: 1 } })
    expect(message).toContain("$.server.prot")
    expect(message).toMatch(/unknown key|not allowed|unexpected/i)
  })

  it("a bad config: a wrong type: {\"server\":{\"port\":\"x\"}} names $.server.port and what was expected", async () => {
    const { message } = await edgeWith({ server: { port: "x" } })
    expect(message).toContain("$.server.port")
    expect(message).toMatch(/expected/i)
    expect(message).toMatch(/int|number/i)
  })

  it("a bad config: a missing field: a model without id names $.models[0].id", async () => {
    const { message } = await edgeWith({ models: [{ provider: { type: "echo" } }] })
    expect(message).toContain("$.models[0].id")
    expect(message).toMatch(/missing|required/i)
  })

  it("config schema prints the config's JSON Schema object", async () => {
    const result = await runIop(["config", "schema"])
    expect(result.code, result.stderr).toBe(0)
    const schema = JSON.parse(result.stdout)
    expect(schema.type).toBe("object")
    expect(String(schema.$schema)).toMatch(/json-schema\.org/)
    expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(["server", "runs", "models"]))
  })

  it("config check exits 0 for a good file (the contract's example)", async () => {
    const file = writeTempFile(CONTRACT_EXAMPLE)
    const result = await runIop(["config", "check", file])
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain(file)
  })

  it("config check exits 2 for a bad file, naming the file and the JSON path", async () => {
    const file = writeTempFile({ models: [{ id: "m", provider: { type: "openai", baseUrl: "ftp://nope" } }] })
    const result = await runIop(["config", "check", file])
    expect(result.code, result.stderr).toBe(2)
    expect(result.stderr).toContain(file)
    expect(result.stderr).toContain("$.models[0].provider")
  })
})
