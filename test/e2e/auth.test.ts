import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { postJson, jsonOf } from "../support/e2e.js"
import { type InProcessEdge, runIop, startInProcessEdge, writeTempFile } from "../support/edgeProcess.js"

/**
 * `server.apiKeys`: every /v1 request needs one of the keys; /healthz and /metrics need none. A key source that
 * yields no key stops the binary (exit 2); the HTTP behaviour runs on in-process edges (`Edge.layerServer`).
 */

describe("API keys", () => {
  let edge: InProcessEdge
  const request = { model: "echo", messages: [{ role: "user" as const, content: "secret handshake" }] }

  const expect401 = async (client: OpenAI) => {
    try {
      await client.chat.completions.create(request)
    } catch (e) {
      expect(e).toBeInstanceOf(OpenAI.AuthenticationError)
      const error = e as InstanceType<typeof OpenAI.APIError>
      expect(error.status).toBe(401)
      expect(error.type).toBe("authentication_error")
      expect(error.code).toBe("invalid_api_key")
      return
    }
    throw new Error("expected a 401")
  }

  beforeAll(async () => {
    edge = await startInProcessEdge({
      config: {
        server: { apiKeys: ["sk-local-1", "sk-local-2"] },
        models: [{ id: "echo", provider: { type: "echo", tokenDelayMs: 0 } }]
      }
    })
  })
  afterAll(async () => {
    await edge?.stop()
  })

  it("a wrong API key is a 401 authentication_error / invalid_api_key", async () => {
    await expect401(new OpenAI({ baseURL: edge.baseURL, apiKey: "sk-wrong", maxRetries: 0 }))
    // A prefix of a valid key is wrong too.
    await expect401(new OpenAI({ baseURL: edge.baseURL, apiKey: "sk-local", maxRetries: 0 }))
  })

  it("a missing Authorization header is a 401 in the OpenAI error shape", async () => {
    const response = await postJson(`${edge.baseURL}/chat/completions`, request)
    expect(response.status).toBe(401)
    const body = await jsonOf(response)
    expect(body.error).toMatchObject({ type: "authentication_error", code: "invalid_api_key" })
    expect(typeof body.error.message).toBe("string")

    const models = await fetch(`${edge.baseURL}/models`)
    expect(models.status).toBe(401)
  })

  it("a malformed Authorization header (not Bearer, empty key) is a 401", async () => {
    for (const authorization of ["sk-local-1", "Basic sk-local-1", "Bearer ", "Bearer"]) {
      const response = await postJson(`${edge.baseURL}/chat/completions`, request, { authorization })
      expect(response.status, authorization).toBe(401)
      await response.text()
    }
  })

  it("a stream request with a wrong key is refused with 401 before any event", async () => {
    const response = await postJson(`${edge.baseURL}/chat/completions`, { ...request, stream: true }, { authorization: "Bearer nope" })
    expect(response.status).toBe(401)
    expect(response.headers.get("content-type")).toMatch(/^application\/json/)
    await response.text()
  })

  it("any of the configured keys is accepted (200)", async () => {
    for (const apiKey of ["sk-local-1", "sk-local-2"]) {
      const client = new OpenAI({ baseURL: edge.baseURL, apiKey, maxRetries: 0 })
      const completion = await client.chat.completions.create(request)
      expect(completion.choices[0]!.message.content).toBe("secret handshake")
      const models = await client.models.list()
      expect(models.data.map((m) => m.id)).toEqual(["echo"])
    }
  })

  it("/healthz and /metrics need no key", async () => {
    expect((await fetch(`${edge.url}/healthz`)).status).toBe(200)
    const metrics = await fetch(`${edge.url}/metrics`)
    expect(metrics.status).toBe(200)
    expect(await metrics.text()).toContain("iop_chat_requests_total")
  })
})

describe.concurrent("API key sources that yield no key stop the edge (it never starts open)", () => {
  const echo = [{ id: "echo", provider: { type: "echo", tokenDelayMs: 0 } }]

  /** `iop edge` on `server`: exit 2 before listening, one message; returns it. */
  const refused = async (server: object, env: Record<string, string> = {}): Promise<{ message: string; file: string }> => {
    const file = writeTempFile({ server, models: echo })
    const result = await runIop(["edge", "--config", file, "--port", "0"], { env })
    expect(result.listened, result.stdout).toBe(false)
    expect(result.code, result.stderr).toBe(2)
    const message = result.stderr.trim()
    expect(message.split("\n"), message).toHaveLength(1)
    expect(message).toContain(file)
    return { message, file }
  }

  it.each([
    ["empty", ""],
    ["only a separator and blanks", " , "]
  ])("server.apiKeysEnv set to a variable that is %s: exit 2, naming the variable", async (_, value) => {
    const { message } = await refused({ apiKeysEnv: "IOP_TEST_KEYS" }, { IOP_TEST_KEYS: value })
    expect(message).toContain("$.server.apiKeysEnv")
    expect(message).toContain("IOP_TEST_KEYS")
    expect(message).toMatch(/no (API )?key/i)
  })

  it("server.apiKeysFile with only comments and blank lines: exit 2, naming the key file, quoting none of it", async () => {
    const keys = writeTempFile("# sk-retired-1\n\n   \n# rotate monthly\n", "keys.txt")
    const { message } = await refused({ apiKeysFile: keys })
    expect(message).toContain("$.server.apiKeysFile")
    expect(message).toContain(keys)
    expect(message).toMatch(/no (API )?key/i)
    expect(message).not.toContain("sk-retired-1")
  })

  it("keys from server.apiKeysFile and server.apiKeysEnv are enforced", async () => {
    const keys = writeTempFile("# team\nsk-file\n", "keys.txt")
    const edge = await startInProcessEdge({
      config: { server: { apiKeysFile: keys, apiKeysEnv: "IOP_TEST_KEYS" }, models: echo },
      env: { IOP_TEST_KEYS: "sk-env-1, sk-env-2" }
    })
    try {
      const request = { model: "echo", messages: [{ role: "user", content: "hi" }] }
      const open = await postJson(`${edge.baseURL}/chat/completions`, request)
      expect(open.status).toBe(401)
      await open.text()
      for (const key of ["sk-file", "sk-env-1", "sk-env-2"]) {
        const response = await postJson(`${edge.baseURL}/chat/completions`, request, { authorization: `Bearer ${key}` })
        expect(response.status, key).toBe(200)
        await response.text()
      }
    } finally {
      await edge.stop()
    }
  })
})

/** The README's curl examples, each run against the config it is shown with (the quick start's: none, i.e. the default). */
describe("README curl examples", () => {
  const readme = readFileSync(fileURLToPath(new URL("../../README.md", import.meta.url)), "utf8")
  const ownModels = readme.indexOf("## Your own models")
  const nextSection = readme.indexOf("\n## ", ownModels + 1)
  const blocks = (text: string, lang: string): Array<string> =>
    Array.from(text.matchAll(new RegExp("```" + lang + "\\n([\\s\\S]*?)```", "g")), (m) => m[1] ?? "")
  const curls = (text: string) =>
    blocks(text, "sh")
      .filter((b) => b.includes("curl "))
      .map((b) => {
        const line = b.replace(/\\\n\s*/g, " ")
        const url = /curl\s+(?:-N\s+)?(\S+)/.exec(line)?.[1] ?? ""
        const headers = Object.fromEntries(
          Array.from(line.matchAll(/-H\s+"([^":]+):\s*([^"]*)"/g), (m) => [(m[1] ?? "").toLowerCase(), m[2] ?? ""])
        )
        return { url, headers, body: /-d\s+'([^']*)'/.exec(line)?.[1] ?? "" }
      })

  const run = async (edge: InProcessEdge, curl: ReturnType<typeof curls>[number]) => {
    const url = curl.url.replace(/^(http:\/\/)?localhost:8080/, edge.url)
    const response = await fetch(url, { method: "POST", headers: curl.headers, body: curl.body })
    expect(response.status, `${curl.url} ${JSON.stringify(curl.headers)}`).toBe(200)
    expect(await response.text()).toMatch(/data: \[DONE\]\n\n$/)
  }

  it("the quick start's curl works against the default config (`npm start`, no API keys)", async () => {
    const quick = curls(readme.slice(0, ownModels))
    expect(quick.length).toBeGreaterThan(0)
    // The default config, as `npm start` serves it with no file (test/e2e/setup.test.ts runs that command).
    const edge = await startInProcessEdge()
    try {
      for (const curl of quick) await run(edge, curl)
    } finally {
      await edge.stop()
    }
  })

  it("the curl shown with the README's config (which sets apiKeys) passes its key and works against that config", async () => {
    const section = readme.slice(ownModels, nextSection)
    const config = JSON.parse(blocks(section, "json")[0] ?? "{}")
    expect(config.server.apiKeys).toEqual(["sk-local-1"])
    const shown = curls(section)
    expect(shown.length, "a curl example in the README's config section").toBeGreaterThan(0)
    const edge = await startInProcessEdge({ config })
    try {
      for (const curl of shown) {
        expect(curl.headers["authorization"]).toBe("Bearer sk-local-1")
        await run(edge, curl)
        // And without its key, the same request is refused.
        const refused = await fetch(curl.url.replace(/^(http:\/\/)?localhost:8080/, edge.url), { method: "POST", body: curl.body })
        expect(refused.status).toBe(401)
        await refused.text()
      }
    } finally {
      await edge.stop()
    }
  })
})
