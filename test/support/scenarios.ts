import { type FakeUpstream, type RecordedRequest, type Script, startFakeUpstream } from "./fakeUpstream.js"

/**
 * A fake upstream shared by the tests of a file: each test registers a
 * script under a unique scenario key and sends the key as its last user
 * message; the upstream answers each request with the script of its key.
 */

export const lastUserText = (body: unknown): string | undefined => {
  const messages = (body as { messages?: Array<{ role?: string; content?: unknown }> } | undefined)?.messages ?? []
  const user = [...messages].reverse().find((m) => m.role === "user")
  if (user === undefined) return undefined
  if (typeof user.content === "string") return user.content
  if (Array.isArray(user.content)) {
    return user.content.map((p: { text?: unknown }) => (typeof p.text === "string" ? p.text : "")).join("")
  }
  return undefined
}

export interface ScenarioUpstream extends FakeUpstream {
  /** Registers `script` for requests whose last user message is `key`; returns the key. */
  readonly script: (key: string, script: Script | ((index: number) => Script)) => string
  /** The requests recorded for `key`, in order. */
  readonly requestsFor: (key: string) => ReadonlyArray<RecordedRequest>
}

export const startScenarioUpstream = async (): Promise<ScenarioUpstream> => {
  const scripts = new Map<string, Script | ((index: number) => Script)>()
  const counts = new Map<string, number>()
  const upstream = await startFakeUpstream((request) => {
    const key = lastUserText(request.body) ?? ""
    const script = scripts.get(key)
    const n = counts.get(key) ?? 0
    counts.set(key, n + 1)
    if (script === undefined) {
      return { kind: "json", status: 500, body: { error: { message: `no script for ${JSON.stringify(key)}`, type: "test_error" } } }
    }
    return typeof script === "function" ? script(n) : script
  })
  return {
    ...upstream,
    script: (key, script) => {
      scripts.set(key, script)
      return key
    },
    requestsFor: (key) => upstream.requests.filter((r) => lastUserText(r.body) === key)
  }
}
